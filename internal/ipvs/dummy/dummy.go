package dummy

import (
	"errors"
	"net/netip"
)

// LinkName is the ipvs mode's dummy link (upstream's defaultDummyDevice).
const LinkName = "kube-ipvs0"

// ErrLinkNotFound is wrapped by the errors of calls that need kube-ipvs0 when
// it does not exist.
var ErrLinkNotFound = errors.New("link " + LinkName + " not found")

// Interface manages kube-ipvs0 and reads the node's addresses.
type Interface interface {
	// EnsureLink creates kube-ipvs0 (down) unless it exists.
	EnsureLink() error
	// DeleteLink deletes kube-ipvs0; a missing link is not an error, a link of
	// that name that is not a dummy is (it is not ours).
	DeleteLink() error
	// Addresses returns the addresses bound to kube-ipvs0.
	Addresses() ([]netip.Addr, error)
	// AddAddress binds a to kube-ipvs0 (as a /32 or /128).
	AddAddress(a netip.Addr) error
	// DeleteAddress unbinds a from kube-ipvs0.
	DeleteAddress(a netip.Addr) error
	// NodeAddresses returns the addresses of every other link (upstream's
	// GetAllLocalAddressesExcept(kube-ipvs0)): the node's own, which are
	// NodePort addresses and never unbound from kube-ipvs0's list.
	NodeAddresses() ([]netip.Addr, error)
}
