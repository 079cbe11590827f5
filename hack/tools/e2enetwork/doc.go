// Package e2enetwork builds upstream's end-to-end test binary with only the sig-network
// specs (k8s.io/kubernetes/test/e2e/network) linked in: `go test -c` of this package
// gives an e2e.test that the ginkgo CLI runs against the cluster of `make cluster`.
//
// Linking one spec package instead of all of test/e2e cuts the cold build on 2 cores
// from tens of minutes to a few. The TestMain in e2e_test.go does what upstream's
// test/e2e/e2e_test.go does (flags, embedded manifests, AfterReadingAllFlags) and then
// hands over to upstream's RunE2ETests.
package e2enetwork
