// Package labtest shares one lab between the tests of a package.
//
// Contract: Suite.Main starts the lab before the tests and closes it after them, then
// verifies that nothing of it survives (failing the run loudly otherwise). When the lab
// cannot run here (not root, binaries missing) every test skips with the reason, unless
// KPROXY_E2E_REQUIRED=1, in which case the run fails instead. In -short mode no lab is
// started and every test skips, KPROXY_E2E_REQUIRED=1 or not.
package labtest
