package live

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// Fake is a Reader with canned answers, for tests.
type Fake struct {
	// Listings are nft listings by "FAMILY TABLE" ("ip kube-proxy").
	Listings map[string]string
	// Saves are iptables-save outputs by family.
	Saves map[v1.IPFamily][]byte
	// Recent are the "-m recent" lists by family and name.
	Recent map[v1.IPFamily]map[string][]netip.Addr
	// Addresses are the node's addresses by family.
	Addresses map[v1.IPFamily][]netip.Addr
	// IPSetSave is `ipset save` output.
	IPSetSave string
	// IPVSState is the IPVS state by family.
	IPVSState map[v1.IPFamily]ipvstrace.IPVS
	// Bridges are the bridges br_netfilter shows to iptables, by family.
	Bridges map[v1.IPFamily][]string
}

var _ Reader = (*Fake)(nil)

// NFTables implements Reader.
func (f *Fake) NFTables(_ context.Context, family, table string) (string, error) {
	l, ok := f.Listings[family+" "+table]
	if !ok {
		return "", fmt.Errorf("the kernel has no table %s %s", family, table)
	}
	return l, nil
}

// IPTablesSave implements Reader.
func (f *Fake) IPTablesSave(_ context.Context, family v1.IPFamily) ([]byte, string, error) {
	s, ok := f.Saves[family]
	if !ok {
		return nil, "", fmt.Errorf("no %s iptables rules", family)
	}
	return s, "iptables-save (fake)", nil
}

// IPTablesRecent implements Reader.
func (f *Fake) IPTablesRecent(_ context.Context, family v1.IPFamily) (map[string][]netip.Addr, error) {
	return f.Recent[family], nil
}

// LocalAddresses implements Reader.
func (f *Fake) LocalAddresses(_ context.Context, family v1.IPFamily) ([]netip.Addr, error) {
	return f.Addresses[family], nil
}

// IPSets implements Reader.
func (f *Fake) IPSets(context.Context) ([]ipset.SavedSet, error) {
	return ipset.ParseSaveSets([]byte(f.IPSetSave))
}

// IPVS implements Reader.
func (f *Fake) IPVS(_ context.Context, family v1.IPFamily) (ipvstrace.IPVS, error) {
	return f.IPVSState[family], nil
}

// Bridged implements Reader.
func (f *Fake) Bridged(_ context.Context, family v1.IPFamily) ([]string, error) {
	return f.Bridges[family], nil
}
