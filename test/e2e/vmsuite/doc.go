// Package vmsuite runs the end-to-end suite of test/e2e/nftables in ipvs mode in the
// test VM with Debian 12's kernel (test/vm): this machine's kernel has no IP_VS; and a
// short subset of it in nftables and iptables mode on that 6.1 kernel.
//
// The host half (TestIPVSSuiteInVM) starts a lab with no pods, whose node1 runs etcd
// and kube-apiserver, builds the suite's test binary, and boots the VM with a NIC on a
// tap in that node1 (198.18.0.0/30, a range reserved for network benchmarks and never
// routed). In the VM the suite builds its own lab (node1, node2, the external client,
// the pods) and, instead of starting a control plane, moves the VM's eth0 into its
// node1 and uses the host's API server over it (lab.ExternalControlPlane): the proxy
// under test, run in the VM's node1, reaches the API server as on a real node, and
// the API server runs at the host's speed rather than under emulation. The suite's
// output streams back to the host test's output. RunInVM is that host half for any
// end-to-end test package; test/e2e/differential runs its VM cases (ipvs mode
// against upstream's binary) with it.
//
// Contract:
//   - It runs only with KPROXY_E2E_VM=1 (OwnStepEnv; hack/vm-test.sh, part of make
//     test, sets it): in `go test ./test/...` it skips, so that the VM does not share the
//     machine's two cores with the other suites.
//   - Root only; without root, the VM assets (make vm-assets), qemu or the kube-proxy
//     binary the test skips with the reason, and fails instead with
//     KPROXY_E2E_REQUIRED=1; it skips in -short mode.
//   - Everything on the host is the lab's (namespaces it creates and deletes; the tap
//     lives in its node1 and goes with qemu); the VM is thrown away.
//   - KPROXY_VMSUITE_RUN overrides the tests run in the VM (a -test.run pattern;
//     DefaultRun by default, the tests that apply to ipvs within make test's budget).
//   - TestShortSuiteOn61 runs ShortRun in nftables mode and in iptables mode, each in
//     its own VM, so that the paths for kernels before 6.2 carry real traffic; a run
//     aimed with KPROXY_VMSUITE_RUN or KPROXY_VMSUITE_MODE skips it.
package vmsuite
