#!/usr/bin/env bash
# The kernel matrix (make vm-test): the kernel-level test packages run in the test VM
# with Debian 12's kernel (6.1) through go test -exec kproxy-vmexec (see docs/vm.md).
# The assets come from hack/vm-assets.sh (cached). The test binaries are built without
# -race: the VM emulates its CPU (TCG), several times slower than the host.
#
# Each package's output goes to _output/vm/test.log (go test -v); what is printed here
# is each package's result line and every skipped or failed test, so that a test
# skipped in the VM (a binary or module missing there) does not pass unseen.
# Usage: hack/vm-test.sh [PACKAGE...] (default: VM_PACKAGES below, then the e2e suite in
# ipvs mode in the VM and its short subset in nftables and iptables mode,
# test/e2e/vmsuite, and the differential suite's VM cases, ipvs
# mode's --cleanup with live state and a lab run against upstream's binary; VM_E2E=0
# leaves both out, VM_DIFF=0 only the latter).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=/usr/local/go/bin:$PATH

# The packages whose tests use the kernel (grep -rl roottest.Require internal), with
# the ipvs mode's (IPVS exists only here: ipvs 28 s, ipvs/dummy 23 s, ipset 45 s,
# dataplane/ipvs 27 s with its real-packet test, render/ipvs 76 s: its rules restored and
# saved back).
VM_PACKAGES=(./internal/nftnetlink/ ./internal/render/nftables/ ./internal/render/iptables/
  ./internal/iptables/ ./internal/cleanup/ ./internal/conntrack/ ./internal/nfacct/
  ./internal/localnodeports/ ./internal/ipvs/... ./internal/ipset/ ./internal/dataplane/ipvs/ ./internal/render/ipvs/)
# The whole set takes about 33 minutes in the VM (measured 2026-12-06: nftnetlink 715 s,
# render/nftables more than 8 minutes, render/iptables 404 s, cleanup 137 s, iptables
# 48 s, the others under 20 s each), over the ~12 minutes make test can spend here. So
# the heaviest tests are skipped by default; what runs keeps the pre-6.2 nftables paths
# (render/nftables' TestKernelAcceptsPlans: chains deleted right after their last map
# element, in one transaction and deferred; nftnetlink's TestEquivalentToNftDeltas:
# partial syncs over netlink) and the iptables paths (render/iptables' plans, the
# iptables package's restore/save/detection on both back ends, cleanup of every mode).
# Skipped: full-table equivalence and scale tests (nftnetlink: the golden rulesets,
# typeof maps, 2,000-Service transactions, the nft-written inventory; render/nftables:
# the refresh and golden rulesets; render/iptables: the golden rulesets and packet
# flows; TestPlanMatchesFullRender, pure and 226 s there), which test the renderers
# more than the kernel. VM_SKIP= runs everything.
VM_SKIP=${VM_SKIP-'^(TestPlanMatchesFullRender|TestEquivalentToNftGolden|TestRunScriptIsOneTransaction|TestRunOpsIsOneTransaction|TestEquivalentTypeofMaps|TestInventoryOfNftWrittenTable|TestKernelAcceptsRefresh|TestKernelAcceptsGoldenRulesets|TestKernelGoldenRulesets|TestKernelFlows)$'}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=("${VM_PACKAGES[@]}")

hack/vm-assets.sh
CGO_ENABLED=0 go build -o _output/bin/kproxy-vmexec ./test/vm/cmd/kproxy-vmexec
log=_output/vm/test.log
echo "vm-test: ${pkgs[*]} in the VM ($(cat _output/vm/kernel-release)); full output in $log"
# -p 1: one VM at a time (each has 2 vCPUs, the machine 2 cores), so the durations
# are each package's own.
set +e
start=$SECONDS
KPROXY_VM_VERBOSE=1 go test -count=1 -timeout "${VM_TEST_TIMEOUT:-20m}" -p 1 -v -skip "$VM_SKIP" \
  -exec "$root/_output/bin/kproxy-vmexec" "${pkgs[@]}" > "$log" 2>&1
rc=$?
set -e
grep -E '^(ok |FAIL|--- FAIL|panic:|kproxy-vmexec:)|^ *--- (SKIP|FAIL)' "$log" || true
echo "vm-test: $((SECONDS - start)) s; skipped by VM_SKIP: $VM_SKIP"

# vm_step NAME LOG GREP GO-TEST-ARGS...: runs one host-side e2e step that boots the
# VM (KPROXY_E2E_VM=1), its output to LOG, prints the lines matching GREP, its
# duration, and folds its failure into rc.
vm_step() {
  local name=$1 steplog=$2 pattern=$3 steprc stepstart=$SECONDS
  shift 3
  echo "vm-test: $name; full output in $steplog"
  set +e
  KPROXY_E2E_VM=1 KPROXY_E2E_REQUIRED=1 KPROXY_PROXY_BIN="$root/_output/bin/kube-proxy" \
    go test -count=1 -v "$@" > "$steplog" 2>&1
  steprc=$?
  set -e
  grep -E "^(ok |FAIL|--- FAIL|panic:)|^ *--- (PASS|SKIP|FAIL)|$pattern" "$steplog" || true
  echo "vm-test: $name took $((SECONDS - stepstart)) s"
  if [ $steprc != 0 ]; then
    echo "vm-test: $name FAILED (exit $steprc); see $steplog" >&2
    [ $rc != 0 ] || rc=$steprc
  fi
}

# The end-to-end suite in the VM, against an API server on this host
# (test/e2e/vmsuite): in ipvs mode (TestIPVSSuiteInVM), and a short subset in
# nftables and in iptables mode on the 6.1 kernel (TestShortSuiteOn61). Only with the
# default package set: `hack/vm-test.sh ./pkg/` runs just that package.
if [ $# = 0 ] && [ "${VM_E2E:-1}" = 1 ]; then
  vm_step "the e2e suite in the VM" _output/vm/e2e-ipvs.log 'vmsuite|ipvs_test.go' \
    -timeout 40m ./test/e2e/vmsuite/
fi

# The differential suite's VM cases (test/e2e/differential, vm: true in its corpus):
# upstream's binary (the oracle) and ours in ipvs mode, --cleanup of ipvs mode's live
# state and a lab run, in the VM against this host's API server (TestDifferentialInVM;
# 189 s measured on 2026-12-06 on a loaded machine). Needs
# _output/bin/kube-proxy-upstream (hack/build-tools.sh, part of setup).
if [ $# = 0 ] && [ "${VM_E2E:-1}" = 1 ] && [ "${VM_DIFF:-1}" = 1 ]; then
  vm_step "the differential suite's ipvs cases in the VM" _output/vm/differential-ipvs.log \
    'vm_test.go|differences? from upstream' -timeout 15m -run '^TestDifferentialInVM$' ./test/e2e/differential/
fi
if [ $rc != 0 ]; then
  echo "vm-test: FAILED (exit $rc); see $log" >&2
fi
exit $rc
