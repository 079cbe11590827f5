#!/usr/bin/env bash
# Builds the pinned upstream binaries into _output/bin: etcd, kube-apiserver (the lab's
# real control plane) and upstream kube-proxy as kube-proxy-upstream (the reference peer
# of the benchmarks; _output/bin/kube-proxy is our product), and golangci-lint (`make lint`).
# With arguments (binary names, e.g. `hack/build-tools.sh golangci-lint`) only those are
# considered. A binary is rebuilt only when its inputs (the module's go.mod and go.sum, and the
# link flags) differ from those it was built from, so a warm run is a few hashes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/_output/bin"
mkdir -p "$out"
only=("$@")

# stamp MODULE_DIR LDFLAGS: a digest of what a binary is built from.
stamp() {
  cat "$1/go.mod" "$1/go.sum" <(echo "$2") | sha256sum | cut -d' ' -f1
}

# build MODULE_DIR LDFLAGS NAME=PACKAGE...: builds each stale binary NAME from PACKAGE.
build() {
  local dir=$1 ldflags=$2; shift 2
  local pair bin pkg start want
  want=$(stamp "$dir" "$ldflags")
  for pair in "$@"; do
    bin=${pair%%=*} pkg=${pair#*=}
    if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $bin "* ]]; then
      continue
    fi
    if [ -x "$out/$bin" ] && [ "$(cat "$out/.$bin.stamp" 2>/dev/null)" = "$want" ]; then
      echo "tools: $bin up to date"
      continue
    fi
    echo "tools: building $bin (a cold build takes minutes on 2 cores)"
    start=$SECONDS
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" "$pkg")
    mv -f "$out/$bin.tmp" "$out/$bin"
    echo "$want" > "$out/.$bin.stamp"
    echo "tools: built $bin in $((SECONDS - start))s"
  done
}

# Stamp the Kubernetes binaries with their version, as upstream's release builds do,
# so that /version and the logs say v1.37.2.
kube_version=v1.37.2
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean"

build "$root/hack/tools/etcd" "" etcd=go.etcd.io/etcd/server/v3
build "$root/hack/tools" "$kube_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-proxy-upstream=k8s.io/kubernetes/cmd/kube-proxy
build "$root/hack/tools/lint" "" golangci-lint=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
