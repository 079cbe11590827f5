package dummy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// testNamespace creates a fresh network namespace, deleted when the test
// ends whatever the outcome, and returns its name.
func testNamespace(t *testing.T) string {
	t.Helper()
	roottest.Require(t, "creates a network namespace and a dummy link in it", "ip")
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kpl-%d-ipvs0-%s", os.Getpid(), hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v: %s", name, err, out)
		}
	})
	return name
}

func TestKernelDummyLink(t *testing.T) {
	ns := testNamespace(t)
	n := New("/run/netns/" + ns)
	t.Cleanup(func() { _ = n.Close() })

	if _, err := n.Addresses(); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("Addresses before EnsureLink = %v, want ErrLinkNotFound", err)
	}
	h, err := netns.GetFromName(ns)
	must(t, err)
	defer h.Close()
	// Route only: a kernel without xfrm_user refuses netlink's default set.
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	must(t, err)
	defer nh.Close()

	// Kernels without the dummy driver (this project's development kernel
	// is one) still run the address part, on a bridge of that name: what
	// is bound does not depend on the link's type.
	linkType := "dummy"
	if err := n.EnsureLink(); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatal(err)
		}
		t.Logf("kernel has no dummy links (%v); kube-ipvs0 and eth9 are bridges here, EnsureLink's creation is not covered", err)
		linkType = "bridge"
		out, err := exec.Command("ip", "-n", ns, "link", "add", LinkName, "type", linkType).CombinedOutput()
		must(t, errIf(err, out))
	}
	must(t, n.EnsureLink()) // exists: nothing to do

	// Down, of the type created, in the namespace only.
	link, err := nh.LinkByName(LinkName)
	must(t, err)
	if link.Type() != linkType || link.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("kube-ipvs0 is %s with flags %v, want a %s link, down", link.Type(), link.Attrs().Flags, linkType)
	}

	// The node's addresses: another link's, not kube-ipvs0's.
	out, err := exec.Command("ip", "-n", ns, "link", "add", "eth9", "type", linkType).CombinedOutput()
	must(t, errIf(err, out))
	out, err = exec.Command("ip", "-n", ns, "addr", "add", "192.168.9.2/24", "dev", "eth9").CombinedOutput()
	must(t, errIf(err, out))

	addrs := []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::1")}
	for _, a := range addrs {
		must(t, n.AddAddress(a), n.AddAddress(a))
	}
	got, err := n.Addresses()
	must(t, err)
	if !slices.Equal(got, addrs) {
		t.Errorf("Addresses = %v, want %v", got, addrs)
	}
	// Bound as whole addresses.
	kaddrs, err := nh.AddrList(link, netlink.FAMILY_ALL)
	must(t, err)
	for _, a := range kaddrs {
		if ones, bits := a.Mask.Size(); ones != bits {
			t.Errorf("%v bound with prefix /%d", a.IP, ones)
		}
	}
	node, err := n.NodeAddresses()
	must(t, err)
	if !slices.Contains(node, netip.MustParseAddr("192.168.9.2")) || slices.Contains(node, addrs[0]) {
		t.Errorf("NodeAddresses = %v, want eth9's and not kube-ipvs0's", node)
	}

	must(t, n.DeleteAddress(addrs[1]), n.DeleteAddress(addrs[1]), n.DeleteAddress(addrs[2]))
	got, err = n.Addresses()
	must(t, err)
	if !slices.Equal(got, addrs[:1]) {
		t.Errorf("after deletes: %v, want %v", got, addrs[:1])
	}

	if linkType != "dummy" {
		if err := n.DeleteLink(); err == nil || !strings.Contains(err.Error(), "not dummy") {
			t.Errorf("DeleteLink of a %s = %v, want a not-dummy error", linkType, err)
		}
		return
	}
	must(t, n.DeleteLink(), n.DeleteLink())
	if _, err := nh.LinkByName(LinkName); err == nil {
		t.Error("kube-ipvs0 survived DeleteLink")
	}
}

func errIf(err error, out []byte) error {
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}
