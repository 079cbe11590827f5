# The Makefile only names targets; the work is in hack/. See README.md.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)

GO_TEST_FLAGS ?= -count=1 -timeout 60m
# The end-to-end tests run the product binary that setup built (hack/build.sh), as shipped.
E2E_REQUIRED := KPROXY_E2E_REQUIRED=1
E2E_ENV := $(E2E_REQUIRED) KPROXY_PROXY_BIN=$(CURDIR)/_output/bin/kube-proxy

.PHONY: all setup tools build demo test unit race vet lint generate verify-generated clean bench fuzz

# fuzz: how long each fuzz target runs (`make fuzz FUZZTIME=10m` for a long run);
# make test runs every target for TEST_FUZZTIME.
FUZZTIME ?= 10s
TEST_FUZZTIME ?= 5s

all: build

## setup: install system packages, build the pinned upstream tools and the product.
setup:
	hack/setup.sh

## tools: build only the pinned upstream binaries (etcd, kube-apiserver, kube-proxy-upstream).
tools:
	hack/build-tools.sh

## build: build the product binaries into _output/bin.
build:
	hack/build.sh

## demo: set up, bring up the lab and show the real thing working.
demo: setup
	_output/bin/kproxy-lab demo

## test: set up, then vet, lint, and run every test: the packages of internal/, cmd/ and
## bench/ (unit and kernel tests) once, under the race detector, every fuzz target for
## TEST_FUZZTIME (hack/fuzz.sh; the committed corpora already replay as tests), then the end-to-end
## suites of test/ and deploy/ (which need root and fail, rather than skip, when they
## cannot run), and a share of the nftables suite against the daemon built with -race. The cluster images are built first: the short cluster suite
## (test/e2e/cluster) runs kproxy as a DaemonSet from its image. Last, the kernel tests
## again in a VM with Debian 12's kernel, the e2e suite in ipvs mode there, and the
## differential suite's ipvs cases (vm-test).
test: setup cluster-images vm-assets vet lint verify-generated
	$(E2E_ENV) go test $(GO_TEST_FLAGS) -race ./internal/... ./cmd/... ./bench/...
	FUZZTIME=$(TEST_FUZZTIME) hack/fuzz.sh
	$(E2E_ENV) go test $(GO_TEST_FLAGS) ./test/... ./deploy/...
	@echo "the nftables suite again, with the nft command as the writer (the fallback)"
	$(E2E_ENV) KPROXY_NFTABLES_WRITER=nft go test $(GO_TEST_FLAGS) ./test/e2e/nftables/
	@echo "the same suite in iptables mode"
	$(E2E_ENV) KPROXY_E2E_MODE=iptables go test $(GO_TEST_FLAGS) ./test/e2e/nftables/
	@echo "the same suite with a blank mode in the configuration file (iptables mode, as upstream)"
	$(E2E_ENV) KPROXY_E2E_MODE=default go test $(GO_TEST_FLAGS) ./test/e2e/nftables/
	@echo "the daemon built with -race: churn, restarts, drift repair, a mode switch, the state API (a race report in a proxy's log fails the lab)"
	hack/build.sh --race
	$(E2E_REQUIRED) KPROXY_PROXY_BIN=$(CURDIR)/_output/bin/kube-proxy-race KPROXY_E2E_CHURN_DURATION=30s go test $(GO_TEST_FLAGS) \
		-run '^(TestChurn|TestLifecycle|TestDrift|TestExplain|TestModeSwitch|TestSessionAffinitySurvivesRestart)$$' ./test/e2e/nftables/
	@echo "the real cluster: kproxy as a DaemonSet, upstream's focused sig-network specs, takeover"
	$(E2E_ENV) KPROXY_E2E_CLUSTER=1 go test $(GO_TEST_FLAGS) -v ./test/e2e/cluster/
	@echo "the kernel matrix: the kernel tests again, in a VM with Debian 12's kernel (6.1)"
	hack/vm-test.sh

## bench: set up, then compare kproxy with upstream kube-proxy in the lab (not part of test;
## BENCH_FLAGS=--with-30k ...), and in ipvs mode in the test VM (ratios only; about 11
## minutes more; BENCH_VM=0 skips it). The binary is built static: it is also the VM's agent.
BENCH_VM ?= 1
bench: setup $(if $(filter 1,$(BENCH_VM)),vm-assets)
	CGO_ENABLED=0 go build -o _output/bin/kproxy-bench ./bench/cmd/kproxy-bench
	_output/bin/kproxy-bench $(if $(filter 1,$(BENCH_VM)),,--vm-modes=) $(BENCH_FLAGS)

## image: the container image as a docker-archive tarball in _output/image/ (root; no
## daemon or registry; smoke-tested chrooted; not part of test). See README.md, "Image".
.PHONY: image
image:
	hack/image.sh

## cluster: a real cluster (control plane, 3 kubelet/containerd workers, CoreDNS, kproxy
## as kubeadm's DaemonSet from its image) in network namespaces until Ctrl-C (root).
## CLUSTER_FLAGS=--mode=iptables, --proxy-image=registry.k8s.io/kube-proxy:v1.37.2, ...
.PHONY: cluster e2e-upstream e2e-upstream-slow takeover
cluster:
	hack/cluster.sh up $(CLUSTER_FLAGS)

## e2e-upstream: upstream's sig-network specs that concern a service proxy, against
## upstream kube-proxy and kproxy in nftables and iptables mode (root; about an hour).
## Writes test/cluster/results/e2e-upstream.md; fails if kproxy fails a spec upstream passes.
e2e-upstream:
	hack/cluster.sh e2e --set=full --table=test/cluster/results/e2e-upstream.md $(CLUSTER_FLAGS)

## e2e-upstream-slow: the slow ones ([Slow], session-affinity timeouts), the same way.
e2e-upstream-slow:
	hack/cluster.sh e2e --set=slow --table=test/cluster/results/e2e-upstream-slow.md $(CLUSTER_FLAGS)

## takeover: upstream's DaemonSet image swapped for kproxy's and back, under probes, in
## each mode (root). Writes test/cluster/results/takeover.md.
takeover:
	hack/cluster.sh takeover --table=test/cluster/results/takeover.md $(CLUSTER_FLAGS)

## reliability: issue 16's scenarios in full (proxy restarts in a row with 1,000 Services;
## the API server restarted, then down a minute; a transaction the kernel refuses; odd but
## valid API data; a 30-minute churn
## soak of 10,000 Services at 50 changes/s), kproxy and upstream kube-proxy in nftables and
## iptables mode under continuous probes (root; about 3 h on a 2-core machine:
## the soak takes 2 h 5 min of it, more when loaded, the fuzzing 30 min). Writes
## bench/results/<timestamp>-reliability.md and .json; short versions run in `make test`.
## RELIABILITY_RESTARTS=5, RELIABILITY_SOAK_DURATION=6m RELIABILITY_SOAK_WINDOW=1m,
## RELIABILITY_SOAK_SERVICES=n run a reduced version. Then every fuzz target for
## RELIABILITY_FUZZTIME (2 min each, about 30 min; make test runs them for 5 s each).
## See docs/reliability.md.
RELIABILITY_FUZZTIME ?= 2m
.PHONY: reliability
reliability: setup
	$(E2E_ENV) KPROXY_RELIABILITY=full KPROXY_RELIABILITY_RESTARTS=$(RELIABILITY_RESTARTS) \
		KPROXY_RELIABILITY_SOAK_DURATION=$(RELIABILITY_SOAK_DURATION) KPROXY_RELIABILITY_SOAK_WINDOW=$(RELIABILITY_SOAK_WINDOW) \
		KPROXY_RELIABILITY_SOAK_SERVICES=$(RELIABILITY_SOAK_SERVICES) \
		KPROXY_RELIABILITY_OUT=$(CURDIR)/bench/results go test -count=1 -timeout 4h -v ./test/reliability/
	FUZZTIME=$(RELIABILITY_FUZZTIME) hack/fuzz.sh

## unit: the tests that need neither root nor the upstream binaries.
unit:
	go test $(GO_TEST_FLAGS) -short ./...

## race: the unit packages (internal/, cmd/, bench/) under the race detector, -short
## (no root, kernel or lab test): the quick check of a change; `make test` runs the same
## packages under the race detector with their kernel tests too.
race:
	go test $(GO_TEST_FLAGS) -race -short ./internal/... ./cmd/... ./bench/...

vet:
	go vet ./...

## fuzz: every Go native fuzz target (func FuzzXxx in the fuzz_test.go files), one after
## another, each for FUZZTIME (default 10s; `make fuzz FUZZTIME=10m` for a long run), two
## workers each (FUZZ_PARALLEL). A failing input lands in the package's testdata/fuzz/,
## which plain go test replays. See docs/reliability.md, "Fuzzing".
fuzz:
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

## lint: golangci-lint (pinned in hack/tools/lint, config .golangci.yml) over the whole
## module: internal/, cmd/, bench/ and test/. `_output/bin/golangci-lint fmt` fixes imports.
lint:
	hack/build-tools.sh golangci-lint
	_output/bin/golangci-lint run ./...

## generate: regenerate the files derived from upstream's code (the feature-gate table).
generate:
	hack/generate.sh

## verify-generated: fail when a generated file is stale (part of test).
verify-generated:
	hack/generate.sh --verify

clean:
	rm -rf _output

## cluster-images: the test cluster's images as docker-archives in _output/cluster/images (root;
## after `make tools`; only changed ones are rebuilt). See docs/cluster-images.md.
.PHONY: cluster-images
cluster-images:
	hack/cluster-images.sh

## vm-assets: the test VM's kernel (Debian 12's linux-image-amd64, 6.1) and base initramfs
## in _output/vm (cached: a second run is instant). See docs/vm.md.
.PHONY: vm-assets vm-test
vm-assets:
	hack/vm-assets.sh

## vm-test: the kernel matrix: the kernel-level test packages (those calling
## roottest.Require under internal/) in the 6.1 VM via go test -exec kproxy-vmexec,
## without -race (the VM's CPU is emulated, TCG). Part of test. All of them take about
## 33 minutes there, so the heaviest (full-table equivalence, golden rulesets, scale,
## iptables packet flows) are skipped: what runs keeps the pre-6.2 nftables paths (plans
## deleting chains right after their last map element, netlink partial syncs) and the
## iptables paths; VM_SKIP= runs everything (hack/vm-test.sh says which). Then the
## end-to-end suite in ipvs mode in the VM, against an API server on this host
## (test/e2e/vmsuite), and the differential suite's ipvs cases there (upstream's binary
## and ours: --cleanup of live ipvs state, a lab run; VM_E2E=0 leaves both out, VM_DIFF=0
## the latter). See docs/vm.md.
vm-test: vm-assets
	hack/vm-test.sh
