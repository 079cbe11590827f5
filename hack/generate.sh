#!/usr/bin/env bash
# Regenerates the files derived from upstream's own code (make generate), or, with
# --verify, fails when a committed one differs from what upstream v1.37.2 gives
# (make test runs that). Generators live in the tools module (hack/tools), which
# may import k8s.io/kubernetes; the product module never does.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
verify=false
[ "${1:-}" = "--verify" ] && verify=true

# generate OUTPUT PACKAGE: writes the output of the tools module's PACKAGE to OUTPUT.
generate() {
  local out=$root/$1 pkg=$2 tmp
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' RETURN
  (cd "$root/hack/tools" && go run "$pkg") > "$tmp"
  if $verify; then
    if ! cmp -s "$tmp" "$out"; then
      echo "generate: $1 is stale; run 'make generate' and commit the result:" >&2
      diff -u "$out" "$tmp" | head -40 >&2 || true
      return 1
    fi
    echo "generate: $1 is up to date"
  else
    mv -f "$tmp" "$out"
    echo "generate: wrote $1"
  fi
}

generate internal/config/features_upstream.go ./gengates
