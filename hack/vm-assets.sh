#!/usr/bin/env bash
# Builds the test VM's assets into _output/vm (see docs/vm.md and test/vm/doc.go):
#
#   _output/vm/vmlinuz          Debian 12's kernel (linux-image-amd64's current 6.1 image)
#   _output/vm/initramfs.img    the base initramfs (cpio newc, zstd): busybox, the kernel
#                               modules the kernel tests need with their dependencies (and
#                               modules.dep from depmod), the host's ip, nft, iptables
#                               (nft and legacy), ipset, conntrack, nfacct, unshare,
#                               sysctl and modprobe with their libraries, and /init
#   _output/vm/kernel-release   the kernel's release (uname -r in the VM)
#   _output/vm/stamp            what they were built from (package versions, this script)
#
# Idempotent: when the stamp matches, it prints "up to date" and exits. The .deb files
# are cached in _output/vm/debs (checked against apt's checksums); nothing is installed
# into the host's /boot or /lib/modules: the packages are unpacked into a scratch
# directory, removed at exit. Root is needed (apt-get download into the cache, chroot
# for the library check). Usage: hack/vm-assets.sh [--force]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=_output/vm
mkdir -p "$out"

DEBS_CACHE=$out/debs
# shellcheck source=hack/lib/debs.sh
source hack/lib/debs.sh

# The host packages whose binaries go into the initramfs (their versions key the stamp),
# and the binaries (absolute host paths; the libraries ldd lists come along).
host_pkgs=(iproute2 nftables iptables ipset conntrack nfacct util-linux procps kmod libc6 zstd dash)
# dash is /bin/sh, as on Debian: busybox's sh runs its own applets before PATH's
# programs, so a test's "#!/bin/sh ... exec ip netns exec ..." would get busybox's ip.
host_bins=(/usr/bin/dash /usr/bin/ip /usr/sbin/nft /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi
  /usr/sbin/ipset /usr/sbin/conntrack /usr/sbin/nfacct /usr/bin/unshare /usr/bin/nsenter
  /usr/sbin/sysctl /usr/bin/kmod)
# Names the iptables multi-call binaries answer to (Debian's alternatives point the plain
# names at the nft back end).
xtables_names=(iptables ip6tables)
xtables_tools=("" -save -restore)

# The modules loaded at boot (names or globs over the module tree's file names); the
# others in the tree load on demand through modprobe and modules.alias. What the kernel
# tests exercise: nftables and iptables (both back ends, every match and target the
# renderers write), ipset, ipvs with its schedulers, conntrack over netlink, nfacct; the
# virtual devices (xfrm_user: vishvananda/netlink's handles open an XFRM socket, which
# Debian's kernel has as a module); the VM's own virtio devices.
boot_modules=(
  crc32c_generic nf_tables 'nft_*' nfnetlink nf_conntrack nf_conntrack_netlink nf_nat nf_reject_ipv4
  nf_reject_ipv6 nf_defrag_ipv4 nf_defrag_ipv6 nfnetlink_acct x_tables ip_tables ip6_tables
  iptable_nat iptable_filter iptable_mangle iptable_raw ip6table_nat ip6table_filter
  ip6table_mangle ip6table_raw xt_comment xt_mark xt_MASQUERADE xt_conntrack xt_statistic
  xt_recent xt_addrtype xt_multiport xt_set xt_physdev xt_tcpudp xt_sctp
  ipt_REJECT ip6t_REJECT xt_nat xt_nfacct xt_NFLOG xt_LOG xt_CT xt_state xt_ipvs xt_connmark
  xt_hl xt_limit nft_compat ip_set 'ip_set_hash_*' ip_set_bitmap_port ip_vs ip_vs_rr
  ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_lblc ip_vs_lblcr ip_vs_sh ip_vs_dh ip_vs_sed ip_vs_nq
  ip_vs_mh xfrm_user dummy veth bridge br_netfilter tun virtio_net virtio_console virtio_rng virtio_pci
)
# Whole directories of the module tree that are packed too (loaded on demand).
module_dirs=(kernel/net/netfilter kernel/net/ipv4/netfilter kernel/net/ipv6/netfilter
  kernel/net/bridge)

force=0
[ "${1:-}" = --force ] && force=1

debs_apt_ready linux-image-amd64 busybox-static
# linux-image-amd64 is a metapackage: its dependency names the current image package.
kpkg=$(apt-cache "${DEBS_APT[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kpkg" ] || { echo "vm-assets: apt names no image package for linux-image-amd64" >&2; exit 1; }

stamp() {
  echo "kernel $(apt-cache "${DEBS_APT[@]}" policy "$kpkg" | awk '/Candidate:/ {print $2}') $kpkg"
  echo "busybox-static $(apt-cache "${DEBS_APT[@]}" policy busybox-static | awk '/Candidate:/ {print $2}')"
  dpkg-query -W -f='${Package} ${Version}\n' "${host_pkgs[@]}"
  echo "boot modules: ${boot_modules[*]}"
  sha256sum hack/vm-assets.sh hack/vm/init | cut -d' ' -f1
}
want=$(stamp)
if [ $force = 0 ] && [ -s $out/vmlinuz ] && [ -s $out/initramfs.img ] && [ "$(cat $out/stamp 2>/dev/null)" = "$want" ]; then
  echo "vm-assets: up to date ($kpkg)"
  exit 0
fi
start=$SECONDS

scratch=$(mktemp -d "$out/scratch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mapfile -t debs < <(debs_fetch "$kpkg" busybox-static)
[ ${#debs[@]} = 2 ] || { echo "vm-assets: could not fetch $kpkg and busybox-static" >&2; exit 1; }
for f in "${debs[@]}"; do
  dpkg-deb -x "$f" "$scratch/pkgs"
done
kver=$(basename "$(ls -d "$scratch"/pkgs/lib/modules/*)")
moddir=$scratch/pkgs/lib/modules/$kver
depmod -b "$scratch/pkgs" "$kver"

stage=$scratch/root
mkdir -p "$stage"/{usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,usr/lib64,etc,proc,sys,dev,tmp,run,root,kproxy}
# The merged-/usr layout of Debian 12: the paths ldd prints (/lib/..., /lib64/...) and
# the kernel's /sbin/modprobe resolve through these links.
ln -s usr/bin "$stage/bin"
ln -s usr/sbin "$stage/sbin"
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"

# put FILE: FILE (dereferenced) at its own path in the stage, /lib* and /bin paths
# taken to their /usr place.
put() {
  local src=$1 dst=$1
  case $dst in
    /lib/* | /lib64/* | /bin/* | /sbin/*) dst=/usr$dst ;;
  esac
  mkdir -p "$stage$(dirname "$dst")"
  cp -L "$src" "$stage$dst"
}

# libs FILE...: the libraries ldd lists for FILE..., one path a line.
libs() {
  local f
  for f in "$@"; do
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
  done | sort -u
}

# Modules: the boot list and the directories, with every dependency modules.dep names.
declare -A mods=()
add_mod() { # add_mod RELPATH: RELPATH and its dependencies (modules.dep lists them all)
  local rel=$1 dep
  [ -n "${mods[$rel]:-}" ] && return
  mods[$rel]=1
  for dep in $(awk -v m="$rel:" '$1 == m { $1 = ""; print }' "$moddir/modules.dep"); do
    mods[$dep]=1
  done
}
boot_list=()
# A module's file may spell its underscores as dashes (virtio-rng.ko): the globs match both.
for m in "${boot_modules[@]}"; do
  found=0
  while read -r rel; do
    add_mod "$rel"
    name=$(basename "$rel" .ko)
    boot_list+=("$name")
    found=1
  done < <(cd "$moddir" && find kernel -name "${m//_/[_-]}.ko" | sort)
  [ $found = 1 ] || { echo "vm-assets: no module $m in $kpkg" >&2; exit 1; }
done
for d in "${module_dirs[@]}"; do
  while read -r rel; do add_mod "$rel"; done < <(cd "$moddir" && find "$d" -name '*.ko')
done
smod=$stage/usr/lib/modules/$kver
for rel in "${!mods[@]}"; do
  mkdir -p "$smod/$(dirname "$rel")"
  cp "$moddir/$rel" "$smod/$rel"
done
cp "$moddir"/modules.{builtin,builtin.modinfo,order} "$smod/"
depmod -b "$stage" "$kver"
printf '%s\n' "${boot_list[@]}" > "$stage/etc/kproxy-vm-modules"

# busybox: the shell and the small tools; an applet is linked only where no real
# binary of the same name is packed.
cp "$scratch/pkgs/bin/busybox" "$stage/usr/bin/busybox"
# Host binaries, the iptables extensions (dlopened: ldd of the binaries does not name
# them) and the libraries of all.
for b in "${host_bins[@]}"; do put "$b"; done
xt=/usr/lib/x86_64-linux-gnu/xtables
mkdir -p "$stage$xt"
cp -L "$xt"/*.so "$stage$xt/"
while read -r lib; do put "$lib"; done < <(libs "${host_bins[@]}" "$xt"/*.so)
for n in "${xtables_names[@]}"; do
  for t in "${xtables_tools[@]}"; do
    ln -sf xtables-nft-multi "$stage/usr/sbin/$n$t"
    ln -sf xtables-nft-multi "$stage/usr/sbin/$n-nft$t"
    ln -sf xtables-legacy-multi "$stage/usr/sbin/$n-legacy$t"
  done
done
ln -s dash "$stage/usr/bin/sh"
for n in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf ../bin/kmod "$stage/usr/sbin/$n"; done
for a in $("$stage/usr/bin/busybox" --list); do
  [ -e "$stage/usr/bin/$a" ] || [ -e "$stage/usr/sbin/$a" ] || ln -s busybox "$stage/usr/bin/$a"
done
# What the tools read: protocol and service names (iptables -p tcp, nft), ethertypes.
for f in /etc/protocols /etc/services /etc/ethertypes; do
  [ -f "$f" ] && cp "$f" "$stage/etc/"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$stage/etc/passwd"
printf 'root:x:0:\n' > "$stage/etc/group"
: > "$stage/etc/nsswitch.conf"
install -m 0755 hack/vm/init "$stage/init"

# Every packed ELF file finds its libraries in the stage (checked chrooted, in a
# network namespace of its own).
bad=0
while read -r f; do
  if out_ldd=$(chroot "$stage" /usr/lib64/ld-linux-x86-64.so.2 --list "${f#"$stage"}" 2>&1) && grep -q 'not found' <<<"$out_ldd"; then
    echo "vm-assets: ${f#"$stage"}: $out_ldd" >&2
    bad=1
  fi
done < <(find "$stage/usr/bin" "$stage/usr/sbin" "$stage$xt" -type f)
[ $bad = 0 ] || exit 1
unshare --net chroot "$stage" /usr/sbin/nft --version >/dev/null
unshare --net chroot "$stage" /usr/sbin/iptables-legacy --version >/dev/null

# The archive: newc, owned by root, zstd; padded to 512 bytes so that a per-run archive
# appended to it starts aligned (the kernel reads concatenated archives).
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
  zstd -q -10 -T0 > "$scratch/initramfs.img"
size=$(stat -c %s "$scratch/initramfs.img")
truncate -s $(((size + 511) / 512 * 512)) "$scratch/initramfs.img"
cp "$scratch/pkgs/boot/vmlinuz-$kver" "$scratch/vmlinuz"
mv -f "$scratch/vmlinuz" $out/vmlinuz
mv -f "$scratch/initramfs.img" $out/initramfs.img
echo "$kver" > $out/kernel-release
echo "$want" > $out/stamp
echo "vm-assets: built $kver, ${#mods[@]} modules ($(du -sh "$smod" | cut -f1)), initramfs $(du -h $out/initramfs.img | cut -f1) in $((SECONDS - start)) s"
