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

# build MODULE_DIR LDFLAGS NAME=PACKAGE...: builds each stale binary NAME from PACKAGE
# (a package named NAME=test:PACKAGE is a test binary, `go test -c`).
build() {
  local dir=$1 ldflags=$2; shift 2
  local pair bin pkg start want
  for pair in "$@"; do
    bin=${pair%%=*} pkg=${pair#*=}
    want=$(stamp "$dir" "$ldflags")
    if [[ ${pkg#test:} = ./* ]]; then
      # A package of the tools module itself: its sources are inputs too.
      want=$(cat <(echo "$want") "$dir/${pkg#test:}"/*.go | sha256sum | cut -d' ' -f1)
    fi
    if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $bin "* ]]; then
      continue
    fi
    if [ -x "$out/$bin" ] && [ "$(cat "$out/.$bin.stamp" 2>/dev/null)" = "$want" ]; then
      echo "tools: $bin up to date"
      continue
    fi
    echo "tools: building $bin (a cold build takes minutes on 2 cores)"
    start=$SECONDS
    if [[ $pkg = test:* ]]; then
      (cd "$dir" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" "${pkg#test:}")
    else
      (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" "$pkg")
    fi
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

# The cluster of `make cluster` (test/cluster): the node and control-plane components,
# kubectl, agnhost (the e2e tests' pod image), CoreDNS, the ginkgo CLI and upstream's e2e
# test binary with the sig-network specs (hack/tools/e2enetwork).
build "$root/hack/tools" "$kube_ldflags" \
  kubelet=k8s.io/kubernetes/cmd/kubelet \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl \
  agnhost=k8s.io/kubernetes/test/images/agnhost \
  ginkgo=github.com/onsi/ginkgo/v2/ginkgo \
  e2e-network.test=test:./e2enetwork
build "$root/hack/tools/coredns" "" coredns=github.com/coredns/coredns
