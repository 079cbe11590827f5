#!/usr/bin/env bash
# Builds the product binaries into _output/bin (make build; setup runs it too), static
# (CGO_ENABLED=0) as the image ships them (hack/image.sh checks).
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
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o _output/bin/ ./cmd/...
