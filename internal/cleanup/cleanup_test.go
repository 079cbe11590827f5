package cleanup

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/ipvs"
)

// world is a complete set of fakes holding leftovers of every mode.
type world struct {
	v4, v6 *iptables.Fake
	// v4Restore, when set, stands in for v4 (to inject failures).
	v4Restore iptables.Interface
	nft       map[knftables.Family]*knftables.Fake
	links     *FakeLinks
	ipvs      *ipvs.Fake
	sets      *ipset.Fake
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{
		v4:    loadFake(t, v1.IPv4Protocol, "iptables-mode.save"),
		v6:    loadFake(t, v1.IPv6Protocol, "ipvs-mode.save"),
		nft:   map[knftables.Family]*knftables.Fake{},
		links: &FakeLinks{Links: map[string]netlink.Link{}},
		ipvs:  ipvs.NewFake(),
		sets:  ipset.NewFake(),
	}
	for _, family := range nftablesFamilies {
		fake := knftables.NewFake(family, nftablesTable)
		tx := fake.NewTransaction()
		tx.Add(&knftables.Table{})
		tx.Add(&knftables.Chain{Name: "services"})
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
		w.nft[family] = fake
	}
	for _, name := range []string{ipvsDummyLink, "other0"} {
		w.links.Links[name] = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	}
	var script strings.Builder
	for _, name := range []string{"KUBE-CLUSTER-IP", "KUBE-6-CLUSTER-IP", "KUBE-6-LOAD-BALANCER-SOURCE-CID", "OTHER-SET", "KUBE-SOMETHING-ELSE"} {
		script.WriteString(ipset.CreateLine(ipset.Set{Name: name, Type: ipset.HashIPPort}) + "\n")
	}
	if err := w.sets.Restore(context.Background(), []byte(script.String())); err != nil {
		t.Fatal(err)
	}
	if err := w.ipvs.AddVirtualServer(ipvs.VirtualServer{Address: netip.MustParseAddr("10.96.0.1"), Protocol: v1.ProtocolTCP, Port: 443, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) deps() Deps {
	var v4 iptables.Interface = w.v4
	if w.v4Restore != nil {
		v4 = w.v4Restore
	}
	return Deps{
		IPTables:    []iptables.Interface{v4, w.v6},
		NewNFTables: FakeNFTables(w.nft),
		Links:       w.links,
		IPVS:        w.ipvs,
		IPSets:      w.sets,
	}
}

func (w *world) nftCleaned() bool {
	for _, fake := range w.nft {
		if fake.Table != nil {
			return false
		}
	}
	return true
}

func (w *world) iptablesCleaned() bool {
	return !w.v4.HasChain(tableNAT, "KUBE-SERVICES") && !w.v6.HasChain(tableNAT, "KUBE-SERVICES")
}

func (w *world) ipvsCleaned() bool {
	_, hasLink := w.links.Links[ipvsDummyLink]
	vss, _ := w.ipvs.VirtualServers()
	return !hasLink && len(vss) == 0 && !w.hasSet("KUBE-CLUSTER-IP")
}

func (w *world) hasSet(name string) bool {
	names, _ := w.sets.ListSets(context.Background())
	return slices.Contains(names, name)
}

func TestForMode(t *testing.T) {
	cases := []struct {
		mode                            config.ProxyMode
		wantNFT, wantIPTables, wantIPVS bool
	}{
		{config.ProxyModeNFTables, false, true, true},
		{config.ProxyModeIPTables, true, false, false},
		{config.ProxyModeIPVS, true, false, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			w := newWorld(t)
			if err := ForMode(context.Background(), tc.mode, w.deps()); err != nil {
				t.Fatal(err)
			}
			if got := w.nftCleaned(); got != tc.wantNFT {
				t.Errorf("nftables cleaned = %v, want %v", got, tc.wantNFT)
			}
			if got := w.iptablesCleaned(); got != tc.wantIPTables {
				t.Errorf("iptables cleaned = %v, want %v", got, tc.wantIPTables)
			}
			if got := w.ipvsCleaned(); got != tc.wantIPVS {
				t.Errorf("ipvs cleaned = %v, want %v", got, tc.wantIPVS)
			}
		})
	}
}

func TestAll(t *testing.T) {
	w := newWorld(t)
	if err := All(context.Background(), w.deps()); err != nil {
		t.Fatal(err)
	}
	if !w.nftCleaned() || !w.iptablesCleaned() || !w.ipvsCleaned() {
		t.Fatalf("not everything cleaned: nft=%v iptables=%v ipvs=%v", w.nftCleaned(), w.iptablesCleaned(), w.ipvsCleaned())
	}
	// Other software's link and sets survive; both families of our sets go.
	if _, ok := w.links.Links["other0"]; !ok {
		t.Error("unrelated link other0 was deleted")
	}
	sets, _ := w.sets.ListSets(context.Background())
	if want := []string{"KUBE-SOMETHING-ELSE", "OTHER-SET"}; !slices.Equal(sets, want) {
		t.Errorf("remaining sets = %v, want %v", sets, want)
	}
	// A second run on a clean host succeeds (absent things are not errors).
	if err := All(context.Background(), w.deps()); err != nil {
		t.Errorf("second run: %v", err)
	}
}

func TestAllJoinsErrorsAndRunsEveryPart(t *testing.T) {
	w := newWorld(t)
	restoreErr := errors.New("restore failed")
	flushErr := errors.New("ipvs flush failed")
	w.v4Restore = failingRestore{Fake: w.v4, table: tableFilter, err: restoreErr}
	w.ipvs.SetError("Flush", flushErr)
	w.sets.SetInUse("KUBE-CLUSTER-IP", true)
	w.links.Links[ipvsDummyLink] = &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ipvsDummyLink}}

	err := All(context.Background(), w.deps())
	for _, want := range []error{restoreErr, flushErr} {
		if !errors.Is(err, want) {
			t.Errorf("error does not wrap %v: %v", want, err)
		}
	}
	for _, want := range []string{"KUBE-CLUSTER-IP", "not dummy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	if !w.nftCleaned() {
		t.Error("nftables was not cleaned after other parts failed")
	}
	if _, ok := w.links.Links[ipvsDummyLink]; !ok {
		t.Error("a non-dummy kube-ipvs0 is not ours and must be kept")
	}
	if w.hasSet("KUBE-6-CLUSTER-IP") {
		t.Error("sets after a failing one were not destroyed")
	}
}

func TestIPVSUnavailableIsNotAnError(t *testing.T) {
	w := newWorld(t)
	w.ipvs.SetError("Flush", fmt.Errorf("flushing IPVS services: %w", ErrIPVSUnavailable))
	if err := IPTablesAndIPVS(context.Background(), w.deps()); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.links.Links[ipvsDummyLink]; ok {
		t.Error("kube-ipvs0 not deleted")
	}
}

func TestMissingToolsAreNotErrors(t *testing.T) {
	w := newWorld(t)
	w.v4.SetPresent(false)
	w.v6.SetPresent(false)
	w.sets.SetError("Version", errors.New(`exec: "ipset": executable file not found in $PATH`))
	deps := w.deps()
	deps.NewNFTables = FakeNFTables(nil) // nft unusable in every family
	if err := All(context.Background(), deps); err != nil {
		t.Fatal(err)
	}
	if !w.hasSet("KUBE-CLUSTER-IP") {
		t.Error("sets destroyed although ipset is unavailable")
	}
}

func TestNFTablesAbsentTableIsNotAnError(t *testing.T) {
	fakes := map[knftables.Family]*knftables.Fake{
		knftables.IPv4Family: knftables.NewFake(knftables.IPv4Family, nftablesTable),
		knftables.IPv6Family: knftables.NewFake(knftables.IPv6Family, nftablesTable),
	}
	if err := NFTables(context.Background(), Deps{NewNFTables: FakeNFTables(fakes)}); err != nil {
		t.Fatal(err)
	}
}

func TestOwnedIPSets(t *testing.T) {
	sets := ownedIPSets()
	if len(sets) != 2*len(ipvsIPSets) {
		t.Fatalf("got %d sets", len(sets))
	}
	for _, want := range []string{"KUBE-6-CLUSTER-IP", "KUBE-6-LOAD-BALANCER-SOURCE-CID", "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS"} {
		if !slices.Contains(sets, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, s := range sets {
		if len(s) > maxIPSetNameLen || !strings.HasPrefix(s, "KUBE-") {
			t.Errorf("bad set name %q", s)
		}
	}
}

// countingSets counts Destroy calls.
type countingSets struct {
	*ipset.Fake
	destroyed []string
}

func (c *countingSets) Destroy(ctx context.Context, name string) error {
	c.destroyed = append(c.destroyed, name)
	return c.Fake.Destroy(ctx, name)
}

func TestIPSetsDestroyOnlyThoseThatExist(t *testing.T) {
	w := newWorld(t)
	sets := &countingSets{Fake: w.sets}
	if err := cleanupIPSets(context.Background(), sets); err != nil {
		t.Fatal(err)
	}
	for _, name := range sets.destroyed {
		if !slices.Contains(ownedIPSets(), name) {
			t.Errorf("destroyed %s, which is not ours", name)
		}
	}
	if !slices.Contains(sets.destroyed, "KUBE-CLUSTER-IP") || w.hasSet("KUBE-CLUSTER-IP") {
		t.Error("KUBE-CLUSTER-IP was not destroyed")
	}
	// A second run finds none of ours and destroys nothing.
	sets.destroyed = nil
	if err := cleanupIPSets(context.Background(), sets); err != nil {
		t.Fatal(err)
	}
	if len(sets.destroyed) != 0 {
		t.Errorf("destroyed %v on a node without our sets", sets.destroyed)
	}
	// When the sets cannot be listed, every name is tried, as upstream does.
	w.sets.SetError("ListSets", errors.New("list failed"))
	if err := cleanupIPSets(context.Background(), sets); err != nil {
		t.Fatal(err)
	}
	if len(sets.destroyed) != len(ownedIPSets()) {
		t.Errorf("destroyed %d names after a failed list, want all %d", len(sets.destroyed), len(ownedIPSets()))
	}
}
