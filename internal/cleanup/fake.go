package cleanup

import (
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"
)

// FakeNFTables returns an NFTablesFactory serving the given fakes; a family
// without a fake behaves like a host where nft is unusable.
func FakeNFTables(fakes map[knftables.Family]*knftables.Fake) NFTablesFactory {
	return func(family knftables.Family, table string) (knftables.Interface, error) {
		f, ok := fakes[family]
		if !ok {
			return nil, fmt.Errorf("no nftables for family %s", family)
		}
		return f, nil
	}
}

// FakeLinks is an in-memory Links.
type FakeLinks struct {
	mu    sync.Mutex
	Links map[string]netlink.Link
}

var _ Links = (*FakeLinks)(nil)

// LinkByName implements Links.
func (l *FakeLinks) LinkByName(name string) (netlink.Link, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if link, ok := l.Links[name]; ok {
		return link, nil
	}
	return nil, netlink.LinkNotFoundError{}
}

// LinkDel implements Links.
func (l *FakeLinks) LinkDel(link netlink.Link) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Links, link.Attrs().Name)
	return nil
}
