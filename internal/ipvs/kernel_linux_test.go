package ipvs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// testNamespace creates a fresh network namespace, deleted when the test
// ends whatever the outcome, and returns its path.
func testNamespace(t *testing.T) string {
	t.Helper()
	roottest.Require(t, "creates a network namespace and IPVS services in it", "ip")
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kpl-%d-ipvs-%s", os.Getpid(), hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v: %s", name, err, out)
		}
	})
	// The kernel refuses (EINVAL) an IPv4 real server whose address is
	// neither local nor unicast for the namespace's routing, which is every
	// address while the namespace has no route at all: loopback up gives it
	// its local table, as every node has.
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v: %s", name, err, out)
	}
	return "/run/netns/" + name
}

// kernelNetlink returns a Netlink in a fresh network namespace, or skips the
// test when the kernel has no IPVS.
func kernelNetlink(t *testing.T) *Netlink {
	t.Helper()
	n := New(testNamespace(t))
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Available(); err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("kernel has no IP_VS (ip_vs is neither built in nor loaded): %v", err)
		}
		t.Fatalf("Available: %v", err)
	}
	return n
}

func TestKernelUnavailableIsReported(t *testing.T) {
	// On a kernel without IPVS every call wraps ErrUnavailable; with IPVS, a
	// fresh namespace lists nothing.
	n := New(testNamespace(t))
	t.Cleanup(func() { _ = n.Close() })
	err := n.Available()
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available = %v", err)
	}
	vss, listErr := n.VirtualServers()
	if err != nil {
		if !errors.Is(listErr, ErrUnavailable) {
			t.Errorf("VirtualServers = %v, want ErrUnavailable", listErr)
		}
		t.Logf("this kernel: %v", err)
		return
	}
	if listErr != nil || len(vss) != 0 {
		t.Errorf("a fresh namespace lists %v, %v", vss, listErr)
	}
}

func TestKernelVirtualAndRealServers(t *testing.T) {
	n := kernelNetlink(t)
	families := []struct {
		name     string
		vip      netip.Addr
		rs1, rs2 netip.AddrPort
	}{
		{"ipv4", netip.MustParseAddr("10.96.0.1"), netip.MustParseAddrPort("10.0.0.1:8080"), netip.MustParseAddrPort("10.0.0.2:8080")},
		{"ipv6", netip.MustParseAddr("fd00:10:96::1"), netip.MustParseAddrPort("[fd00:10::1]:8080"), netip.MustParseAddrPort("[fd00:10::2]:8080")},
	}
	for _, fam := range families {
		for i, sched := range Schedulers() {
			t.Run(fam.name+"/"+sched, func(t *testing.T) {
				vs := VirtualServer{Address: fam.vip, Protocol: []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}[i%3], Port: uint16(80 + i), Scheduler: sched}
				k := vs.Key()
				if err := n.AddVirtualServer(vs); errors.Is(err, ErrNotFound) && sched == "twos" {
					t.Skipf("kernel has no twos scheduler (Linux 6.2 and later): %v", err)
				}
				mustDo(t, n.DeleteVirtualServer(k), n.AddVirtualServer(vs))
				if err := n.AddVirtualServer(vs); !errors.Is(err, ErrExists) {
					t.Errorf("second add = %v, want ErrExists", err)
				}
				checkVS(t, n, vs)

				// Session affinity: persistence with a timeout; mh and sh take
				// their scheduler flags.
				vs.Flags, vs.Timeout = FlagPersistent, 10800
				if sched == "mh" || sched == "sh" {
					vs.Flags |= FlagSchedFlag1 | FlagSchedFlag2
				}
				mustDo(t, n.UpdateVirtualServer(vs))
				checkVS(t, n, vs)

				mustDo(t, n.AddRealServer(k, realServer(fam.rs1, 1)), n.AddRealServer(k, realServer(fam.rs2, 1)))
				if err := n.AddRealServer(k, realServer(fam.rs1, 1)); !errors.Is(err, ErrExists) {
					t.Errorf("second add of a real server = %v, want ErrExists", err)
				}
				mustDo(t, n.UpdateRealServer(k, realServer(fam.rs2, 0)))
				got, err := n.RealServers(k)
				mustDo(t, err)
				if diff := cmp.Diff([]RealServer{realServer(fam.rs1, 1), realServer(fam.rs2, 0)}, sortedRS(got), addrOpt); diff != "" {
					t.Errorf("RealServers (-want +got):\n%s", diff)
				}
				mustDo(t, n.DeleteRealServer(k, fam.rs1))
				if err := n.DeleteRealServer(k, fam.rs1); !errors.Is(err, ErrNotFound) {
					t.Errorf("second delete of a real server = %v, want ErrNotFound", err)
				}
				if got, _ := n.RealServers(k); len(got) != 1 || got[0].AddrPort() != fam.rs2 {
					t.Errorf("after delete: %v", got)
				}

				mustDo(t, n.DeleteVirtualServer(k))
				if err := n.DeleteVirtualServer(k); !errors.Is(err, ErrNotFound) {
					t.Errorf("second delete = %v, want ErrNotFound", err)
				}
				if rss, err := n.RealServers(k); err != nil || len(rss) != 0 {
					t.Errorf("RealServers of a deleted service = %v, %v; want none (the kernel's dump is empty)", rss, err)
				}
			})
		}
	}
}

func checkVS(t *testing.T, n *Netlink, want VirtualServer) {
	t.Helper()
	vss, err := n.VirtualServers()
	mustDo(t, err)
	for _, vs := range vss {
		if vs.Key() == want.Key() {
			if diff := cmp.Diff(want, vs, addrOpt); diff != "" {
				t.Errorf("virtual server read back (-want +got):\n%s", diff)
			}
			return
		}
	}
	t.Errorf("virtual server %s not listed in %v", want.Key(), vss)
}

func sortedRS(rss []RealServer) []RealServer {
	return slices.SortedFunc(slices.Values(rss), func(a, b RealServer) int { return a.AddrPort().Compare(b.AddrPort()) })
}

func TestKernelTimeoutsAndFlush(t *testing.T) {
	n := kernelNetlink(t)
	mustDo(t, n.SetTimeouts(Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}))
	mustDo(t, n.SetTimeouts(Timeouts{UDP: 60 * time.Second})) // 0: unchanged
	got, err := n.Timeouts()
	mustDo(t, err)
	if want := (Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 60 * time.Second}); got != want {
		t.Errorf("Timeouts = %+v, want %+v", got, want)
	}

	mustDo(t, n.AddVirtualServer(vsTCP), n.AddVirtualServer(vs6))
	mustDo(t, n.Flush())
	if vss, err := n.VirtualServers(); err != nil || len(vss) != 0 {
		t.Errorf("after Flush: %v, %v", vss, err)
	}
}

func TestKernelCanUse(t *testing.T) {
	n := kernelNetlink(t)
	for _, sched := range []string{"", "wrr", "mh"} {
		if err := CanUse(t.Context(), n, fakeVersioner{version: "v7.19"}, sched); err != nil {
			t.Errorf("CanUse(%q) = %v", sched, err)
		}
	}
	if vss, _ := n.VirtualServers(); len(vss) != 0 {
		t.Errorf("the dummy virtual server was left: %v", vss)
	}
}
