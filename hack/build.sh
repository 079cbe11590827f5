#!/usr/bin/env bash
# Builds the product binaries into _output/bin (make build; setup runs it too), static
# (CGO_ENABLED=0) as the image ships them (hack/image.sh checks); --race builds
# _output/bin/kube-proxy-race instead.
# The link flags stamp component-base's version variables with the upstream release
# kproxy is compatible with, as upstream's release builds do: component-base reads
# them to decide which metrics are deprecated or hidden at this version (and so what
# --show-hidden-metrics-for-version shows). kproxy's own version is
# internal/config.Version (kubernetes_build_info, --version).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kube_version=v1.37.2
ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
cd "$root"
if [ "${1:-}" = --race ]; then
  # The daemon with the race detector, for tests only (never shipped): make test runs
  # the churn e2e test against it (issue 16). The race detector needs cgo (gcc and
  # libc6-dev come with hack/setup.sh). Without -trimpath, the packages `go test
  # -race` compiled just before are reused from the build cache: only the link is new.
  CGO_ENABLED=1 go build -race -ldflags "$ldflags" -o _output/bin/kube-proxy-race ./cmd/kube-proxy
  exit
fi
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o _output/bin/ ./cmd/...
