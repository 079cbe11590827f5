# The Makefile only names targets; the work is in hack/. See README.md.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)

GO_TEST_FLAGS ?= -count=1 -timeout 60m

.PHONY: all setup tools build demo test unit vet clean

all: build

## setup: install system packages, build the pinned upstream tools and the product.
setup:
	hack/setup.sh

## tools: build only the pinned upstream binaries (etcd, kube-apiserver, kube-proxy-upstream).
tools:
	hack/build-tools.sh

## build: build the product binaries into _output/bin.
build:
	go build -trimpath -o _output/bin/ ./cmd/...

## demo: set up, bring up the lab and show the real thing working.
demo: setup
	_output/bin/kproxy-lab demo

## test: set up, then vet and run every test (end-to-end tests need root and fail,
## rather than skip, when they cannot run).
test: setup vet
	KPROXY_E2E_REQUIRED=1 go test $(GO_TEST_FLAGS) ./...
	@echo "the nftables suite again, with the nft command as the writer (the fallback)"
	KPROXY_E2E_REQUIRED=1 KPROXY_NFTABLES_WRITER=nft go test $(GO_TEST_FLAGS) ./test/e2e/nftables/
	@echo "the same suite in iptables mode"
	KPROXY_E2E_REQUIRED=1 KPROXY_E2E_MODE=iptables go test $(GO_TEST_FLAGS) ./test/e2e/nftables/

## bench: set up, then compare kproxy with upstream kube-proxy in the lab (not part of test; BENCH_FLAGS=--with-30k ...).
bench: setup
	go run ./bench/cmd/kproxy-bench $(BENCH_FLAGS)

## unit: the tests that need neither root nor the upstream binaries.
unit:
	go test $(GO_TEST_FLAGS) -short ./...

vet:
	go vet ./...

clean:
	rm -rf _output
