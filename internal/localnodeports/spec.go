package localnodeports

import (
	"iter"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// Spec is the localhost listener of one TCP NodePort.
type Spec struct {
	Name     model.ServicePortName
	NodePort uint16
	// Endpoints are the backends, sorted; never empty.
	Endpoints []netip.AddrPort
	// AffinityTimeout is the ClientIP session affinity window; 0 without affinity.
	AffinityTimeout time.Duration
}

// Equal reports whether s and o describe the same listener.
func (s *Spec) Equal(o *Spec) bool {
	return s.Name == o.Name && s.NodePort == o.NodePort && s.AffinityTimeout == o.AffinityTimeout &&
		slices.Equal(s.Endpoints, o.Endpoints)
}

// ListenAddress is the loopback address the listeners of family bind: 127.0.0.1 or
// ::1, as upstream (not the whole 127.0.0.0/8).
func ListenAddress(family v1.IPFamily) netip.Addr {
	if family == v1.IPv6Protocol {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// ServesLoopback reports whether the expanded nodePortAddresses explicitly include
// loopback for family, as upstream's NodePortAddresses.ContainsExplicitLoopback: a
// CIDR of the family whose network address is a loopback address ("127.0.0.0/8",
// "127.0.0.1/32", "::1/128"), not a catch-all one that merely contains loopback.
// Only then does the userspace proxy serve TCP NodePorts on loopback.
func ServesLoopback(family v1.IPFamily, nodePortAddresses []string) bool {
	for _, s := range nodePortAddresses {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Unmap().Is4() != (family == v1.IPv4Protocol) {
			continue
		}
		if p.Masked().Addr().IsLoopback() {
			return true
		}
	}
	return false
}

// SpecFor returns the listener v needs in family, if any: v is a TCP ServicePort
// with a NodePort and usable endpoints of the family for external traffic (Local
// ones with externalTrafficPolicy Local, else Cluster ones), as upstream.
func SpecFor(family v1.IPFamily, v *model.ServicePortView) (Spec, bool) {
	if v == nil || v.ServicePort == nil || v.Protocol != v1.ProtocolTCP || v.NodePort <= 0 || v.NodePort > 65535 {
		return Spec{}, false
	}
	eps := v.ClusterEndpoints
	if v.ExternalPolicyLocal {
		eps = v.LocalEndpoints
	}
	s := Spec{Name: v.Name, NodePort: uint16(v.NodePort)}
	for _, ep := range eps {
		if ep == nil || ep.IP.Is4() != (family == v1.IPv4Protocol) || ep.Port <= 0 || ep.Port > 65535 {
			continue
		}
		s.Endpoints = append(s.Endpoints, ep.AddrPort())
	}
	if len(s.Endpoints) == 0 {
		return Spec{}, false
	}
	slices.SortFunc(s.Endpoints, netip.AddrPort.Compare)
	s.Endpoints = slices.Compact(s.Endpoints)
	if v.SessionAffinity() {
		s.AffinityTimeout = time.Duration(v.StickyMaxAgeSeconds) * time.Second
	}
	return s, true
}

// Views is what a Tracker reads of the committed model (*model.State).
type Views interface {
	View(name model.ServicePortName) *model.ServicePortView
	Views() iter.Seq[*model.ServicePortView]
}

// Tracker keeps the listeners the applied model of one family needs and hands them
// to a manager after every sync that succeeded. It does no I/O itself; it must be
// used from the goroutine that syncs (the model is not read concurrently with
// Commit).
type Tracker struct {
	family v1.IPFamily
	model  Views
	out    Interface
	specs  map[model.ServicePortName]Spec
	// sorted is specs by name, rebuilt when specs change.
	sorted []Spec
	dirty  bool
}

// NewTracker returns a Tracker of family's model handing the listeners to out.
func NewTracker(family v1.IPFamily, m Views, out Interface) *Tracker {
	return &Tracker{family: family, model: m, out: out, specs: map[model.ServicePortName]Spec{}}
}

// Synced is called after every successful sync: full (every ServicePort was
// written) or with the ServicePorts the sync applied as changed or deleted. It hands
// the complete list of listeners to the manager every time, so that a listener that
// could not be bound is retried, as upstream's SyncNodePorts after every sync.
func (t *Tracker) Synced(full bool, changed, deleted []model.ServicePortName) {
	if full {
		if len(t.specs) > 0 {
			clear(t.specs)
			t.dirty = true
		}
		for v := range t.model.Views() {
			t.set(v.Name, v)
		}
	} else {
		for _, n := range deleted {
			t.set(n, nil)
		}
		for _, n := range changed {
			t.set(n, t.model.View(n))
		}
	}
	if t.dirty {
		t.sorted = t.sorted[:0]
		for _, s := range t.specs {
			t.sorted = append(t.sorted, s)
		}
		slices.SortFunc(t.sorted, func(a, b Spec) int { return model.CompareServicePortNames(a.Name, b.Name) })
		t.dirty = false
	}
	t.out.Sync(slices.Clone(t.sorted))
}

// set records the listener of name (v nil: the ServicePort is gone).
func (t *Tracker) set(name model.ServicePortName, v *model.ServicePortView) {
	old, had := t.specs[name]
	s, ok := SpecFor(t.family, v)
	switch {
	case ok && had && old.Equal(&s):
	case ok:
		t.specs[name] = s
		t.dirty = true
	case had:
		delete(t.specs, name)
		t.dirty = true
	}
}
