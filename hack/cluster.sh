#!/usr/bin/env bash
# Runs the real cluster of test/cluster (root): `hack/cluster.sh up|e2e|takeover [flags]`
# (make cluster, make e2e-upstream, make e2e-upstream-slow, make takeover). It builds
# what the cluster needs first, each step skipping what is up to date: the upstream
# binaries (hack/build-tools.sh: kubelet, the control plane, kubectl, CoreDNS, agnhost,
# ginkgo, the e2e binary), the product, and the images (hack/cluster-images.sh: kproxy's,
# upstream kube-proxy's, pause, agnhost, busybox, CoreDNS, ...). The cluster lives in
# network namespaces; kproxy-cluster tears it down on exit, Ctrl-C or SIGTERM.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH
if [ "$(id -u)" != 0 ]; then
  echo "cluster: must run as root (network namespaces, mounts, cgroups)" >&2
  exit 1
fi
hack/setup.sh
hack/cluster-images.sh
go build -o _output/bin/kproxy-cluster ./cmd/kproxy-cluster
exec _output/bin/kproxy-cluster "$@"
