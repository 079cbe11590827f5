#!/usr/bin/env bash
# Builds the test cluster's container images (make cluster-images; root): one
# docker-archive per image in _output/cluster/images/, for `ctr -n k8s.io images
# import`, and index.txt there, "<file> <image-ref>" a line. The cluster cannot pull,
# so every image a node or an e2e spec runs is made here, under the name upstream's
# e2e tests use (k8s test/utils/image/manifest.go at v1.37.2), from Debian's .deb files
# (hack/lib/debs.sh) and binaries built from source (_output/bin: hack/build-tools.sh
# builds agnhost and coredns; this script builds pause and the prober). kproxy's image
# and the same with upstream's kube-proxy come from hack/image.sh. See
# docs/cluster-images.md for what each holds and why.
#
# An image is rebuilt only when its inputs changed: a stamp (_output/cluster/images/
# .NAME.stamp) of its packages' .deb files (name, version, checksum), the files it
# takes, the shell functions that assemble and test it, hack/lib/debs.sh, the Go of
# cmd/kproxy-image and internal/image, and SOURCE_DATE_EPOCH (default 0: every image
# is reproducible). Each image, once written, is unpacked into a temporary directory,
# every ELF file in it is checked to resolve its libraries inside it, and its tools
# run chrooted there in a private mount namespace (no network use).
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH
start=$SECONDS

if [ "$(id -u)" != 0 ]; then
  echo "cluster-images: must run as root (the smoke tests chroot into the images)" >&2
  exit 1
fi
# shellcheck source=hack/lib/debs.sh
source hack/lib/debs.sh

out=_output/cluster/images
bin=_output/bin
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}
mkdir -p "$out"
work=$(mktemp -d "$root/_output/cluster/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
debs_tool
tool=$DEBS_TOOL
index=()

# The inputs every image shares.
common=$(cat hack/lib/debs.sh cmd/kproxy-image/*.go internal/image/*.go go.sum \
  <(go version) <(echo "$SOURCE_DATE_EPOCH") | sha256sum | cut -d' ' -f1)

# Our static programs.
echo "cluster-images: go build pause"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$bin/pause" ./test/cluster/pause
echo "cluster-images: go build kproxy-prober"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$bin/kproxy-prober" ./test/cluster/cmd/kproxy-prober
# Upstream's "boom server" of the invalid-conntrack-state spec, from the tools module.
echo "cluster-images: go build regression-issue-74839"
(cd hack/tools && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' \
  -o "$root/$bin/regression-issue-74839" k8s.io/kubernetes/test/images/regression-issue-74839)
for f in agnhost coredns kube-proxy-upstream; do
  [ -x "$bin/$f" ] || { echo "cluster-images: $bin/$f is missing (hack/build-tools.sh builds it)" >&2; exit 1; }
done
porter=$(cd hack/tools && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter

# etc_files DIR [user=LINE | group=LINE]...: DIR/etc/passwd and DIR/etc/group with
# root and nobody (group nogroup), then the given lines.
etc_files() {
  local dir=$1; shift
  mkdir -p "$dir/etc"
  {
    echo "root:x:0:0:root:/root:/bin/sh"
    echo "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"
  } > "$dir/etc/passwd"
  {
    echo "root:x:0:"
    echo "nogroup:x:65534:"
  } > "$dir/etc/group"
  local e
  for e in "$@"; do
    case $e in
      group=*) echo "${e#group=}" >> "$dir/etc/group" ;;
      user=*) echo "${e#user=}" >> "$dir/etc/passwd" ;;
    esac
  done
  chmod 0644 "$dir/etc/passwd" "$dir/etc/group"
}

# glibc_base DIR: what a Debian tree with glibc needs that maintainer scripts would have
# made: name service configuration (hosts from /etc/hosts, then DNS: the kubelet mounts
# both /etc/hosts and /etc/resolv.conf), /tmp, /root.
glibc_base() {
  local dir=$1
  mkdir -p "$dir/etc" "$dir/tmp" "$dir/root"
  chmod 1777 "$dir/tmp"
  chmod 0700 "$dir/root"
  printf '%s\n' "passwd: files" "group: files" "shadow: files" "hosts: files dns" \
    "networks: files" "protocols: files" "services: files" "ethers: files" "rpc: files" \
    > "$dir/etc/nsswitch.conf"
}

# make_image NAME REF: the image NAME.tar in $out, named REF, built by the functions
# NAME_rootfs DIR (fills DIR with the Debian packages of NAME_pkgs, if any, and sets
# the array args, the rest of the kproxy-image build command line) and tested by
# NAME_smoke DIR (DIR: the unpacked image). The array inputs lists the host files it
# takes (for the stamp).
make_image() {
  local name=$1 ref=$2 fn=${1//-/_}
  local archive=$out/$name.tar stamp=$out/.$name.stamp want t0=$SECONDS
  local -n pkgs=${fn}_pkgs
  want=$({
    echo "$ref $common"
    [ ${#pkgs[@]} = 0 ] || debs_manifest "${pkgs[@]}"
    [ ${#inputs[@]} = 0 ] || sha256sum "${inputs[@]}"
    declare -f make_image smoke etc_files glibc_base "${fn}_rootfs" "${fn}_smoke"
    declare -p tc_atm
  } | sha256sum | cut -d' ' -f1)
  index+=("$name.tar $ref")
  if [ -f "$archive" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "cluster-images: $ref up to date"
    return
  fi
  echo "cluster-images: building $ref"
  rm -f "$stamp"
  local dir=$work/$name
  mkdir -p "$dir"
  args=()
  "${fn}_rootfs" "$dir/rootfs"
  "$tool" build --tag "$ref" --output "$dir/$name.tar" "${args[@]}" > "$dir/$name.txt"
  "$tool" unpack --image "$dir/$name.tar" --dir "$dir/smoke"
  debs_check_elf "$dir/smoke"
  "${fn}_smoke" "$dir/smoke"
  # Into place only when it passed (the report names the archive where it was written).
  sed "s|$dir/$name.tar|$archive|" "$dir/$name.txt" > "$out/$name.txt"
  mv -f "$dir/$name.tar" "$archive"
  rm -rf "$dir"
  echo "$want" > "$stamp"
  echo "cluster-images: built $ref in $((SECONDS - t0))s"
}

# iproute2's tc module for ATM qdiscs links libatm, which is only recommended.
tc_atm=(usr/lib/x86_64-linux-gnu/tc/q_atm.so)

# smoke DIR CMD...: debs_smoke, indented.
smoke() { debs_smoke "$@" | sed 's/^/cluster-images: /'; }

# --- registry.k8s.io/pause: our pause, alone (as upstream's: USER 65535).
pause_pkgs=()
pause_rootfs() {
  args=(--static-file "$bin/pause:/pause:0755" --entrypoint '["/pause"]' --user 65535:65535)
}
# As PID 1 of a new PID namespace: SIGTERM ends it with status 0.
pause_smoke() {
  local dir=$1 u c="" i rc=0
  smoke "$dir" /pause -v
  unshare --mount --net --pid --fork chroot "$dir" /pause 2>/dev/null &
  u=$!
  for i in $(seq 50); do
    c=$(tr -d ' ' < "/proc/$u/task/$u/children" 2>/dev/null || true)
    [ -n "$c" ] && [ "$(cat "/proc/$c/comm" 2>/dev/null)" = pause ] && break
    c=""
    sleep 0.1
  done
  [ -n "$c" ] || { kill -KILL "$u"; echo "pause did not start" >&2; return 1; }
  sleep 0.2 # its handlers
  kill -TERM "$c"
  wait "$u" || rc=$?
  [ "$rc" = 0 ] || { echo "pause: SIGTERM as PID 1 gave status $rc, want 0" >&2; return 1; }
  echo "cluster-images:   /pause as PID 1: SIGTERM gives status 0"
}
inputs=("$bin/pause")
make_image pause registry.k8s.io/pause:3.10.2

# --- the boom server (test/images/regression-issue-74839): sends a TCP segment out of
# the connection's window over a raw socket, so that conntrack marks it INVALID; the
# Conntrack spec "should not be vulnerable to the invalid conntrack state bug" runs it.
# Upstream's image is debian-base with the binary; the spec runs nothing else in it.
regression_issue_74839_pkgs=()
regression_issue_74839_rootfs() {
  args=(--static-file "$bin/regression-issue-74839:/regression-issue-74839:0755"
    --entrypoint '["/regression-issue-74839"]')
}
# The image has no shell: the binary runs chrooted, and without POD_IP(S) it panics
# with "No valid IP found" (it ran, and read its environment).
regression_issue_74839_smoke() {
  local dir=$1 got
  if got=$(env -i PATH="$DEBS_PATH" unshare --mount --net --fork chroot "$dir" /regression-issue-74839 2>&1); then
    echo "regression-issue-74839 without POD_IP exited 0, want its panic" >&2
    return 1
  fi
  grep -q "No valid IP found" <<<"$got" || { echo "regression-issue-74839: $got" >&2; return 1; }
  echo "cluster-images:   /regression-issue-74839 runs (without POD_IP: No valid IP found)"
}
inputs=("$bin/regression-issue-74839")
make_image regression-issue-74839 registry.k8s.io/e2e-test-images/regression-issue-74839:1.5

# --- agnhost: upstream's Dockerfile (test/images/agnhost) on Debian instead of Alpine.
agnhost_pkgs=(dash bash coreutils grep sed findutils procps curl netcat-openbsd wget
  bind9-dnsutils iproute2 socat libc-bin netbase debianutils mawk iperf hostname)
agnhost_rootfs() {
  local dir=$1
  DEBS_REMOVE=("${tc_atm[@]}")
  debs_rootfs "$dir" "${agnhost_pkgs[@]}"
  DEBS_REMOVE=()
  glibc_base "$dir"
  # What update-alternatives would link: nc (netcat-openbsd's, with -v -t -u -z -w),
  # awk, which; /bin/sh is dash's own link. iperf where upstream's Dockerfile puts it.
  debs_alternative "$dir" /bin/nc /bin/nc.openbsd
  debs_alternative "$dir" /bin/netcat /bin/nc.openbsd
  debs_alternative "$dir" /usr/bin/awk /usr/bin/mawk
  debs_alternative "$dir" /usr/bin/which /usr/bin/which.debianutils
  mkdir -p "$dir/usr/local/bin"
  ln -sfn /usr/bin/iperf "$dir/usr/local/bin/iperf"
  # user-defined-in-image (uid 1000, its own group 1000) in group-defined-in-image
  # (gid 50000), which a SupplementalGroups spec expects (`id -G`: 1000 50000 ...).
  etc_files "$dir" "user=user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" \
    "group=user-defined-in-image:x:1000:" "group=group-defined-in-image:x:50000:user-defined-in-image"
  mkdir -p "$dir/home/user-defined-in-image"
  args=(--rootfs "$dir"
    --static-file "$bin/agnhost:/agnhost:0755" --symlink /agnhost-2:agnhost
    --static-file "$bin/coredns:/coredns:0755" --dir /uploads
    --file "$porter/localhost.crt:/localhost.crt:0644" --file "$porter/localhost.key:/localhost.key:0644"
    --entrypoint '["/agnhost"]' --cmd '["pause"]')
}
agnhost_smoke() {
  local dir=$1 c
  smoke "$dir" sh -c 'echo ok; [ "$(readlink /bin/sh)" = dash ]'
  smoke "$dir" /agnhost-2 --help
  for c in "bash --version" "nc -h" "curl --version" "wget --version" "dig -v" \
    "nslookup -version" "host -V" "ip -V" "ss -V" "socat -V" "find --version" "grep --version" "sed --version" "timeout --version" "awk -W version" \
    "which nc" "getent group group-defined-in-image" "/coredns -version" "hostname --version"; do
    # shellcheck disable=SC2086 # c is words
    smoke "$dir" $c
  done
  smoke "$dir" sh -c 'test "$(id -G user-defined-in-image)" = "1000 50000" && id user-defined-in-image'
  smoke "$dir" sh -c '/usr/local/bin/iperf -v 2>&1 | grep "iperf version 2"'
  # procps reads /proc.
  DEBS_SMOKE_DEV=1 smoke "$dir" ps -o pid,comm
  DEBS_SMOKE_DEV=1 smoke "$dir" pgrep -l -x ps-never-runs --version
  smoke "$dir" sh -c 'test -d /uploads && test -f /localhost.crt && test -f /localhost.key && echo files'
  # OpenBSD nc's options that the specs use (echo hostName | nc -v -t -u -w 2 ...).
  smoke "$dir" sh -c 'nc -h 2>&1 | grep -q -- "-z.*Zero-I/O" && nc -h 2>&1 | grep -q -- "-u.*UDP" && echo nc-flags'
}
inputs=("$bin/agnhost" "$bin/coredns" "$porter/localhost.crt" "$porter/localhost.key")
make_image agnhost registry.k8s.io/e2e-test-images/agnhost:2.66.1

# --- busybox: Debian's static busybox, an applet link for each name in /bin.
busybox_pkgs=(busybox-static)
busybox_rootfs() {
  local dir=$1 a
  debs_rootfs "$dir" "${busybox_pkgs[@]}"
  while read -r a; do
    [ "$a" = busybox ] || ln -sfn busybox "$dir/bin/$a"
  done < <(env -i PATH="$DEBS_PATH" unshare --mount --net --fork chroot "$dir" /bin/busybox --list)
  [ -L "$dir/bin/sh" ] || { echo "busybox: no sh applet" >&2; return 1; }
  etc_files "$dir"
  mkdir -p "$dir/tmp" "$dir/root" "$dir/home" "$dir/var"
  chmod 1777 "$dir/tmp"
  args=(--rootfs "$dir" --cmd '["sh"]')
}
busybox_smoke() {
  local dir=$1
  smoke "$dir" sh -c 'echo ok; [ "$(readlink /bin/sh)" = busybox ]'
  smoke "$dir" busybox
  smoke "$dir" ls /bin/wget /bin/nslookup /bin/sleep
}
inputs=()
make_image busybox registry.k8s.io/e2e-test-images/busybox:1.37.0-2

# --- glibc-dns-testing: Debian (upstream's is bookworm-slim) with dig and CoreDNS.
glibc_dns_testing_pkgs=(dash bash coreutils grep sed libc-bin bind9-dnsutils netbase mawk)
glibc_dns_testing_rootfs() {
  local dir=$1
  debs_rootfs "$dir" "${glibc_dns_testing_pkgs[@]}"
  glibc_base "$dir"
  debs_alternative "$dir" /usr/bin/awk /usr/bin/mawk
  etc_files "$dir"
  args=(--rootfs "$dir" --static-file "$bin/coredns:/coredns:0755")
}
glibc_dns_testing_smoke() {
  local dir=$1 c
  smoke "$dir" sh -c 'echo ok; [ "$(readlink /bin/sh)" = dash ]'
  for c in "dig -v" "host -V" "nslookup -version" "getent passwd root" "seq 1 3" "bash --version" \
    "/coredns -version"; do
    # shellcheck disable=SC2086 # c is words
    smoke "$dir" $c
  done
}
inputs=("$bin/coredns")
make_image glibc-dns-testing registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1

# --- nginx: Debian's nginx (bookworm's real package; nginx-light and nginx-core are
# transitional there) with the configuration of the official image: port 80, the
# default page, logs to the container's stdout and stderr, in the foreground.
nginx_pkgs=(nginx dash coreutils)
nginx_rootfs() {
  local dir=$1
  DEBS_REMOVE=(etc/nginx/sites-available etc/nginx/sites-enabled etc/nginx/snippets
    etc/nginx/modules-available etc/nginx/modules-enabled etc/ufw etc/logrotate.d etc/default
    "${tc_atm[@]}")
  debs_rootfs "$dir" "${nginx_pkgs[@]}"
  DEBS_REMOVE=()
  glibc_base "$dir"
  etc_files "$dir" "user=www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin" "group=www-data:x:33:"
  mkdir -p "$dir/var/log/nginx" "$dir/var/lib/nginx" "$dir/run" "$dir/etc/nginx/conf.d"
  ln -sfn /dev/stdout "$dir/var/log/nginx/access.log"
  ln -sfn /dev/stderr "$dir/var/log/nginx/error.log"
  cat > "$dir/etc/nginx/nginx.conf" <<'EOF'
# The test cluster's nginx (hack/cluster-images.sh): as the official image's.
user www-data;
worker_processes auto;
pid /run/nginx.pid;
error_log /var/log/nginx/error.log notice;

events {
    worker_connections 1024;
}

http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;

    server {
        listen 80;
        listen [::]:80;
        server_name localhost;
        location / {
            root /usr/share/nginx/html;
            index index.html index.htm;
        }
    }
}
EOF
  args=(--rootfs "$dir" --cmd '["nginx", "-g", "daemon off;"]')
}
nginx_smoke() {
  local dir=$1
  smoke "$dir" nginx -v
  # nginx -t opens the logs (/dev/stdout, /dev/stderr) and makes its temporary
  # directories: /dev and /proc for it, in the smoke test's mount namespace only.
  DEBS_SMOKE_DEV=1 smoke "$dir" nginx -t
  grep -q "Welcome to nginx" "$dir/usr/share/nginx/html/index.html"
  smoke "$dir" sh -c 'cat /usr/share/nginx/html/index.html >/dev/null && echo the default index'
}
inputs=()
make_image nginx registry.k8s.io/e2e-test-images/nginx:1.27.0-2

# --- distroless-iptables: iptables (both back ends, Debian's alternatives set to nft,
# as kproxy's image), conntrack, a shell and the tools a host-network spec runs there
# (sleep, grep, which conntrack).
distroless_iptables_pkgs=(iptables conntrack dash coreutils grep debianutils)
distroless_iptables_rootfs() {
  local dir=$1
  DEBS_REMOVE=(usr/sbin/iptables-apply usr/sbin/ip6tables-apply)
  debs_rootfs "$dir" "${distroless_iptables_pkgs[@]}"
  DEBS_REMOVE=()
  glibc_base "$dir"
  debs_iptables_alternatives "$dir"
  debs_alternative "$dir" /usr/bin/which /usr/bin/which.debianutils
  mkdir -p "$dir/run"
  etc_files "$dir"
  args=(--rootfs "$dir")
}
distroless_iptables_smoke() {
  local dir=$1 c
  smoke "$dir" sh -c 'echo ok; [ "$(readlink /bin/sh)" = dash ]'
  for c in "iptables --version" "iptables-legacy --version" "ip6tables --version" \
    "iptables-nft-save --version" "ip6tables-legacy-restore --version" "conntrack --version" \
    "sleep 0" "grep --version" "which conntrack"; do
    # shellcheck disable=SC2086 # c is words
    smoke "$dir" $c
  done
}
inputs=()
make_image distroless-iptables registry.k8s.io/build-image/distroless-iptables:v0.9.9

# --- coredns: our CoreDNS build alone, as root (the upstream image's nonroot user
# binds port 53 through a file capability, which these layers do not carry).
coredns_pkgs=()
coredns_rootfs() {
  local dir=$1
  etc_files "$dir"
  args=(--static-file "$bin/coredns:/coredns:0755" --file "$dir/etc/passwd:/etc/passwd:0644"
    --file "$dir/etc/group:/etc/group:0644" --dir /tmp:1777 --entrypoint '["/coredns"]')
}
coredns_smoke() { smoke "$1" /coredns -version; }
inputs=("$bin/coredns")
make_image coredns registry.k8s.io/coredns/coredns:v1.14.6

# --- the prober: test/cluster/cmd/kproxy-prober alone.
kproxy_prober_pkgs=()
kproxy_prober_rootfs() {
  args=(--static-file "$bin/kproxy-prober:/kproxy-prober:0755" --entrypoint '["/kproxy-prober"]')
}
kproxy_prober_smoke() { smoke "$1" /kproxy-prober --help; }
inputs=("$bin/kproxy-prober")
make_image kproxy-prober kproxy.local/prober:dev

# --- kube-proxy: kproxy's image and the same with upstream's binary (hack/image.sh),
# linked here; rebuilt when hack/image.sh, its packages or the binary changed.
version=$(sed -n 's/^var Version = "\(.*\)"$/\1/p' internal/config/version.go)
proxy_image() { # NAME REF BINARY ARCHIVE [ENV...]
  local name=$1 ref=$2 binary=$3 archive=$4; shift 4
  local stamp=$out/.$name.stamp want t0=$SECONDS report=${archive%.tar}.txt
  [ "$binary" != "$bin/kube-proxy" ] || report=_output/image/build.txt
  want=$({
    echo "$ref $common"
    debs_manifest iptables nftables ipset
    sha256sum hack/image.sh "$binary"
  } | sha256sum | cut -d' ' -f1)
  index+=("$name.tar $ref")
  if [ -f "$out/$name.tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "cluster-images: $ref up to date"
    return
  fi
  echo "cluster-images: building $ref (hack/image.sh)"
  rm -f "$stamp"
  env "$@" hack/image.sh | sed 's/^/cluster-images: /'
  ln -f "$archive" "$out/$name.tar" 2>/dev/null || cp -f "$archive" "$out/$name.tar"
  cp -f "$report" "$out/$name.txt"
  echo "$want" > "$stamp"
  echo "cluster-images: built $ref in $((SECONDS - t0))s"
}
CGO_ENABLED=0 hack/build.sh
proxy_image kproxy "kproxy.local/kube-proxy:$version" "$bin/kube-proxy" "_output/image/kube-proxy-$version.tar"
proxy_image kube-proxy-upstream registry.k8s.io/kube-proxy:v1.37.2 "$bin/kube-proxy-upstream" \
  _output/image/kube-proxy-upstream.tar KPROXY_IMAGE_BINARY="$bin/kube-proxy-upstream" \
  KPROXY_IMAGE_TAG=registry.k8s.io/kube-proxy:v1.37.2 KPROXY_IMAGE_ARCHIVE=_output/image/kube-proxy-upstream.tar

printf '%s\n' "${index[@]}" > "$out/index.txt.tmp"
mv -f "$out/index.txt.tmp" "$out/index.txt"
echo "cluster-images: $out/index.txt:"
total=0
for line in "${index[@]}"; do
  read -r file ref <<<"$line"
  size=$(stat -c %s "$out/$file")
  total=$((total + size))
  digest=$(sed -n 's/^image: manifest digest //p' "$out/${file%.tar}.txt" 2>/dev/null || true)
  awk -v f="$file" -v s="$size" -v r="$ref" -v d="$digest" \
    'BEGIN { printf "cluster-images:   %-24s %6.1f MiB  %s\ncluster-images:     %s\n", f, s / 1048576, r, d }'
done
awk -v n=${#index[@]} -v s=$total -v t=$((SECONDS - start)) \
  'BEGIN { printf "cluster-images: %d images, %.1f MiB, in %ds\n", n, s / 1048576, t }'
