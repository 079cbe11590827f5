#!/usr/bin/env bash
# One-time setup of a fresh Debian machine (as root) for everything in this repository:
# the system packages the proxy, the lab and the tests use, the pinned upstream binaries
# (hack/build-tools.sh) and the product. Safe to re-run: each step skips what is done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
  echo "setup: must run as root (it installs packages; the lab creates network namespaces)" >&2
  exit 1
fi

# nftables/iptables: the dataplanes and their inspection; ipset: what upstream's ipvs mode
# leaves behind (cleanup tests); conntrack: inspecting flows; util-linux: unshare;
# iproute2: network namespaces and veth for the lab; procps/psmisc: process inspection;
# containerd, runc and containernetworking-plugins (ptp, host-local): the nodes of the
# real cluster (test/cluster, make cluster); gcc and libc6-dev: cgo, which the race
# detector of `make race` (part of `make test`) needs; chromium and fonts-dejavu-core:
# the headless browser that loads the status page in its end-to-end test
# (test/e2e/nftables/statuspage_test.go), and a font for its screenshots; qemu-system-x86,
# cpio, kmod (depmod), zstd and nfacct: the test VM with Debian's kernel that
# hack/vm-assets.sh builds and `make vm-test` boots (nfacct is packed into it).
packages=(nftables iptables ipset conntrack iproute2 procps psmisc util-linux ca-certificates
  containerd runc containernetworking-plugins gcc libc6-dev chromium fonts-dejavu-core
  qemu-system-x86 cpio kmod zstd nfacct)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: system packages present"
fi

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH=/usr/local/go/bin:$PATH
  else
    echo "setup: no Go toolchain found (expected /usr/local/go)" >&2
    exit 1
  fi
fi

"$root/hack/build-tools.sh"
echo "setup: building the product"
"$root/hack/build.sh"
echo "setup: done"
