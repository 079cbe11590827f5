#!/usr/bin/env bash
# Builds kproxy's container image without a container daemon or registry (make image):
# a docker-archive tarball (docker load, ctr -n k8s.io images import) in _output/image/.
#
# Layers: the distribution's files that the product runs, from Debian's .deb files
# (iptables and ip6tables with both back ends, nft, ipset, and their shared libraries
# down to glibc: the apt dependency closure of those three packages), then the static
# product binary at /usr/local/bin/kube-proxy (hack/build.sh with CGO_ENABLED=0).
# No conntrack command: the product cleans conntrack over netlink.
#
# The .deb files are cached in _output/image/debs by version; cmd/kproxy-image assembles
# and writes the image (internal/image: sorted tar entries, owner 0:0, every time
# SOURCE_DATE_EPOCH or the Unix epoch), so the same inputs give the same digest.
# Afterwards the image's flattened filesystem is unpacked into a temporary directory and
# each shipped tool runs chrooted there (--version only: no netfilter change, no network).
# The Debian part is hack/lib/debs.sh, shared with the test cluster's images
# (hack/cluster-images.sh).
#
# The same image with another kube-proxy binary (upstream's, for the test cluster):
#   KPROXY_IMAGE_BINARY=_output/bin/kube-proxy-upstream \
#   KPROXY_IMAGE_TAG=registry.k8s.io/kube-proxy:v1.37.2 \
#   KPROXY_IMAGE_ARCHIVE=_output/image/kube-proxy-upstream.tar hack/image.sh
# KPROXY_IMAGE_BINARY (default _output/bin/kube-proxy, built here) must be static; for
# another binary nothing is built, the labels name kube-proxy and its --version, the tag
# defaults to kproxy.local/NAME:VERSION, the archive to _output/image/NAME.tar and the
# report to the archive's name with .txt (build.txt for the product's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH
start=$SECONDS

if [ "$(id -u)" != 0 ]; then
  echo "image: must run as root (the smoke test chroots into the image)" >&2
  exit 1
fi
# shellcheck source=hack/lib/debs.sh
source hack/lib/debs.sh

out=_output/image
product=_output/bin/kube-proxy
binary=${KPROXY_IMAGE_BINARY:-$product}
version=$(sed -n 's/^var Version = "\(.*\)"$/\1/p' internal/config/version.go)
[ -n "$version" ] || { echo "image: no Version in internal/config/version.go" >&2; exit 1; }
if [ "$binary" = "$product" ]; then
  tag=${KPROXY_IMAGE_TAG:-kproxy.local/kube-proxy:$version}
  archive=${KPROXY_IMAGE_ARCHIVE:-$out/kube-proxy-$version.tar}
  report=$out/build.txt
  rootfs=$out/rootfs
  echo "image: building the static product binary"
  CGO_ENABLED=0 hack/build.sh
  labels=(--version "$version")
else
  [ -x "$binary" ] || { echo "image: $binary: no such executable" >&2; exit 1; }
  bin_name=$(basename "$binary")
  bin_version=$("$binary" --version | awk '{print $NF}')
  tag=${KPROXY_IMAGE_TAG:-kproxy.local/$bin_name:$bin_version}
  archive=${KPROXY_IMAGE_ARCHIVE:-$out/$bin_name.tar}
  report=${archive%.tar}.txt
  rootfs=$out/rootfs-$bin_name
  labels=(--label org.opencontainers.image.title=kube-proxy --label "org.opencontainers.image.version=$bin_version")
fi
echo "image: $tag from $binary ($archive)"

# The packages: the dependency closure of what the product runs (Depends and
# Pre-Depends; no recommends or suggests). What the product does not need besides
# documentation and the like (debs_rootfs): the shell-script tools (the image has no
# shell) and the sample nftables configuration.
DEBS_REMOVE=(usr/sbin/iptables-apply usr/sbin/ip6tables-apply etc/nftables.conf)
debs_rootfs "$rootfs" iptables nftables ipset

# iptables, ip6tables and their -save/-restore: Debian's update-alternatives layout
# (/usr/sbin/iptables -> /etc/alternatives/iptables -> /usr/sbin/iptables-nft), set to
# the nft back end. Upstream's image points these names at iptables-wrapper, which
# detects the host's back end on first use; kproxy detects it itself
# (internal/iptables/detect.go) and then runs only the explicit iptables-nft-* or
# iptables-legacy-* names, so the plain names serve people and other tools in the
# container, and nft is what the detection falls back to and what current distributions
# and kubelets use. `update-alternatives`-style relinking of /etc/alternatives/* switches them.
debs_iptables_alternatives "$rootfs"
# /run for the xtables lock (kubeadm mounts /run/xtables.lock there), /tmp.
mkdir -p "$rootfs/run" "$rootfs/tmp"
chmod 0755 "$rootfs/run"
chmod 1777 "$rootfs/tmp"

# Every ELF file resolves its shared libraries inside the tree (the xtables extensions
# are dlopened, so the smoke test below would not catch them).
debs_check_elf "$rootfs"

echo "image: assembling $tag"
debs_tool
tool=$DEBS_TOOL
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0} "$tool" build --rootfs "$rootfs" \
  --binary "$binary" --tag "$tag" "${labels[@]}" --output "$archive" > "$report"

echo "image: smoke test (chrooted into the unpacked image)"
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
"$tool" unpack --image "$archive" --dir "$smoke"
for cmd in "/usr/local/bin/kube-proxy --version" "iptables-nft --version" \
  "iptables-legacy --version" "ip6tables --version" "ip6tables-legacy --version" \
  "iptables-nft-restore --version" "iptables-legacy-save --version" "nft --version" \
  "ipset --version"; do
  # shellcheck disable=SC2086 # cmd is words
  debs_smoke "$smoke" $cmd | sed 's/^/image: /'
done
rm -rf "$rootfs"

cat "$report"
echo "image: load with: docker load -i $archive   or   ctr -n k8s.io images import $archive"
echo "image: done in $((SECONDS - start))s"
