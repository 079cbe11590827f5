#!/usr/bin/env bash
# Runs every Go native fuzz target of the module (func FuzzXxx in a fuzz_test.go),
# one after another, each for FUZZTIME (default 10s) with FUZZ_PARALLEL workers
# (default 2, at most the machine's cores), minimizing a new input for at most
# FUZZMINIMIZETIME (default 5s). `make fuzz` runs it; `make test` runs it
# with a short bound (TEST_FUZZTIME in the Makefile). The targets are found with
# `go test -list '^Fuzz'` in every package that has a fuzz_test.go, so a new target
# needs no change here. A failing input is written by go test to the package's
# testdata/fuzz/FuzzXxx/ (plain `go test` replays it from then on); every target
# still runs, and the script fails at the end naming those that failed.
# See docs/reliability.md, "Fuzzing".
# Usage: hack/fuzz.sh [PACKAGE...]   (default: every package with a fuzz_test.go)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH

fuzztime=${FUZZTIME:-10s}
parallel=${FUZZ_PARALLEL:-2}
# go test minimizes every new interesting input for up to 60 s by default, during
# which nothing else is fuzzed: with inputs of kilobytes (iptables-save texts,
# listings, netlink datagrams) a short run would only minimize.
minimize=${FUZZMINIMIZETIME:-5s}

if [[ $# -gt 0 ]]; then
  packages=("$@")
else
  mapfile -t packages < <(find internal cmd -name fuzz_test.go -printf './%h/\n' | sort -u)
fi

failed=()
count=0
start=$SECONDS
for pkg in "${packages[@]}"; do
  mapfile -t targets < <(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
  for target in "${targets[@]}"; do
    t0=$SECONDS
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" -parallel "$parallel" "$pkg" >"${TMPDIR:-/tmp}/kproxy-fuzz.log" 2>&1; then
      echo "ok    ${pkg} ${target} ($((SECONDS - t0)) s)"
    else
      echo "FAIL  ${pkg} ${target} ($((SECONDS - t0)) s)"
      grep -v '^fuzz: elapsed' "${TMPDIR:-/tmp}/kproxy-fuzz.log" | tail -40
      failed+=("${pkg} ${target}")
    fi
    count=$((count + 1))
  done
done
echo "fuzzed ${count} targets for ${fuzztime} each in $((SECONDS - start)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
