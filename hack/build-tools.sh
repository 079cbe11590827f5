#!/usr/bin/env bash
# Builds the pinned upstream binaries into _output/bin: etcd, kube-apiserver (the lab's
# real control plane) and upstream kube-proxy as kube-proxy-upstream (the reference peer
# of the benchmarks; _output/bin/kube-proxy is our product).
# A binary is rebuilt only when its module files are newer than it, so a warm run is
# a few stat calls.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/_output/bin"
mkdir -p "$out"

# up_to_date BIN MODULE_DIR: true when BIN exists and is newer than the module's files.
up_to_date() {
  local bin=$1 dir=$2
  [ -x "$bin" ] || return 1
  [ "$bin" -nt "$dir/go.mod" ] && [ "$bin" -nt "$dir/go.sum" ]
}

# build MODULE_DIR NAME=PACKAGE...: builds each stale binary NAME from PACKAGE.
build() {
  local dir=$1; shift
  local pair bin pkg start
  for pair in "$@"; do
    bin=${pair%%=*} pkg=${pair#*=}
    if up_to_date "$out/$bin" "$dir"; then
      echo "tools: $bin up to date"
      continue
    fi
    echo "tools: building $bin (a cold build takes minutes on 2 cores)"
    start=$SECONDS
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$out/$bin.tmp" "$pkg")
    mv -f "$out/$bin.tmp" "$out/$bin"
    echo "tools: built $bin in $((SECONDS - start))s"
  done
}

build "$root/hack/tools/etcd" etcd=go.etcd.io/etcd/server/v3
build "$root/hack/tools" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-proxy-upstream=k8s.io/kubernetes/cmd/kube-proxy
