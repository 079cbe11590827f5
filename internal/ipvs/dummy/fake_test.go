package dummy

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var (
	a4 = netip.MustParseAddr("10.96.0.1")
	a6 = netip.MustParseAddr("fd00:10:96::1")
)

func TestFake(t *testing.T) {
	f := NewFake(netip.MustParseAddr("192.168.1.2"), netip.MustParseAddr("127.0.0.1"))
	if err := f.AddAddress(a4); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("AddAddress without the link = %v, want ErrLinkNotFound", err)
	}
	must(t, f.EnsureLink(), f.EnsureLink(), f.AddAddress(a6), f.AddAddress(a4), f.AddAddress(a4))
	got, err := f.Addresses()
	must(t, err)
	if diff := cmp.Diff([]netip.Addr{a4, a6}, got, addrOpt); diff != "" {
		t.Errorf("Addresses (-want +got):\n%s", diff)
	}
	must(t, f.DeleteAddress(a4), f.DeleteAddress(a4))
	if got, _ := f.Addresses(); len(got) != 1 || got[0] != a6 {
		t.Errorf("after delete: %v", got)
	}
	node, err := f.NodeAddresses()
	must(t, err)
	if len(node) != 2 || node[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("NodeAddresses = %v", node)
	}
	must(t, f.DeleteLink(), f.DeleteLink())
	if f.LinkExists() {
		t.Error("link exists after DeleteLink")
	}
	boom := errors.New("boom")
	f.SetError("EnsureLink", boom)
	if err := f.EnsureLink(); !errors.Is(err, boom) {
		t.Errorf("EnsureLink = %v, want the injected error", err)
	}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// addrOpt compares netip values (which cmp cannot look into) with ==.
var addrOpt = cmpopts.EquateComparable(netip.Addr{})
