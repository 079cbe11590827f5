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
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH
start=$SECONDS

if [ "$(id -u)" != 0 ]; then
  echo "image: must run as root (the smoke test chroots into the image)" >&2
  exit 1
fi

out=_output/image
debs=$out/debs
rootfs=$out/rootfs
version=$(sed -n 's/^var Version = "\(.*\)"$/\1/p' internal/config/version.go)
[ -n "$version" ] || { echo "image: no Version in internal/config/version.go" >&2; exit 1; }
tag=${KPROXY_IMAGE_TAG:-kproxy.local/kube-proxy:$version}
archive=$out/kube-proxy-$version.tar
mkdir -p "$debs"

echo "image: building the static product binary"
CGO_ENABLED=0 hack/build.sh

# The packages: the dependency closure of what the product runs (Depends and
# Pre-Depends; no recommends or suggests).
seeds=(iptables nftables ipset)
if ! apt-cache show "${seeds[@]}" >/dev/null 2>&1; then
  apt-get update -qq
fi
mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${seeds[@]}" | grep -v '^ ' | grep -v '^<' | sort -u)

# Cached by version: apt names each candidate's file (name_version_arch.deb) and its
# checksum; a .deb is downloaded only when that file is missing or does not match.
missing=() files=()
while read -r _ file _ sum; do
  f="$debs/$file"
  files+=("$f")
  if ! [ -f "$f" ] || [ "$(sha256sum "$f" | cut -d' ' -f1)" != "${sum#SHA256:}" ]; then
    missing+=("${file%%_*}")
  fi
done < <(apt-get download --print-uris "${pkgs[@]}")
[ ${#files[@]} = ${#pkgs[@]} ] || { echo "image: apt named ${#files[@]} files for ${#pkgs[@]} packages" >&2; exit 1; }
if [ ${#missing[@]} -gt 0 ]; then
  echo "image: downloading ${missing[*]}"
  (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}")
fi
echo "image: ${#pkgs[@]} packages: ${pkgs[*]}"

rm -rf "$rootfs"
mkdir -p "$rootfs"
for f in "${files[@]}"; do
  dpkg-deb -x "$f" "$rootfs"
done

# What the product does not need: documentation, service units and init scripts,
# iconv modules, the shell-script tools (the image has no shell), sample configs.
rm -rf "$rootfs"/usr/share/{doc,doc-base,man,info,lintian,bug,locale,bash-completion,zsh,gcc} \
  "$rootfs"/{lib,usr/lib}/systemd "$rootfs"/etc/init.d "$rootfs"/usr/lib/x86_64-linux-gnu/gconv \
  "$rootfs"/usr/sbin/{iptables-apply,ip6tables-apply} "$rootfs"/etc/nftables.conf
find "$rootfs" -depth -type d -empty -delete

# iptables, ip6tables and their -save/-restore: Debian's update-alternatives layout
# (/usr/sbin/iptables -> /etc/alternatives/iptables -> /usr/sbin/iptables-nft), set to
# the nft back end. Upstream's image points these names at iptables-wrapper, which
# detects the host's back end on first use; kproxy detects it itself
# (internal/iptables/detect.go) and then runs only the explicit iptables-nft-* or
# iptables-legacy-* names, so the plain names serve people and other tools in the
# container, and nft is what the detection falls back to and what current distributions
# and kubelets use. `update-alternatives`-style relinking of /etc/alternatives/* switches them.
mkdir -p "$rootfs/etc/alternatives"
for fam in iptables ip6tables; do
  for tool in "" -save -restore; do
    ln -sfn "/usr/sbin/$fam-nft$tool" "$rootfs/etc/alternatives/$fam$tool"
    ln -sfn "/etc/alternatives/$fam$tool" "$rootfs/usr/sbin/$fam$tool"
  done
done
# /run for the xtables lock (kubeadm mounts /run/xtables.lock there), /tmp.
mkdir -p "$rootfs/run" "$rootfs/tmp"
chmod 0755 "$rootfs/run"
chmod 1777 "$rootfs/tmp"

# Every ELF file resolves its shared libraries inside the tree (the xtables extensions
# are dlopened, so the smoke test below would not catch them).
loader=/lib64/ld-linux-x86-64.so.2
bad=0
while IFS= read -r -d '' f; do
  [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  rel=/${f#"$rootfs"/}
  [ "$rel" = "$loader" ] || [[ "$rel" = */ld-linux-x86-64.so.2 ]] && continue
  if ! listing=$(chroot "$rootfs" "$loader" --list "$rel" 2>&1) || grep -q 'not found' <<<"$listing"; then
    echo "image: $rel: unresolved libraries: $listing" >&2
    bad=1
  fi
done < <(find "$rootfs" -type f -print0)
[ "$bad" = 0 ] || exit 1

echo "image: assembling $tag"
go build -o _output/bin/kproxy-image ./cmd/kproxy-image
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0} _output/bin/kproxy-image build --rootfs "$rootfs" \
  --binary _output/bin/kube-proxy --tag "$tag" --version "$version" --output "$archive" \
  > "$out/build.txt"

echo "image: smoke test (chrooted into the unpacked image)"
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
_output/bin/kproxy-image unpack --image "$archive" --dir "$smoke"
for cmd in "/usr/local/bin/kube-proxy --version" "iptables-nft --version" \
  "iptables-legacy --version" "ip6tables --version" "ip6tables-legacy --version" \
  "iptables-nft-restore --version" "iptables-legacy-save --version" "nft --version" \
  "ipset --version"; do
  if ! got=$(env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin unshare --mount --fork chroot "$smoke" $cmd 2>&1); then
    echo "image: smoke test failed: $cmd: $got" >&2
    exit 1
  fi
  echo "image:   $cmd: $got"
done
rm -rf "$rootfs"

cat "$out/build.txt"
echo "image: load with: docker load -i $archive   or   ctr -n k8s.io images import $archive"
echo "image: done in $((SECONDS - start))s"
