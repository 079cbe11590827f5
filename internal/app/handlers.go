package app

import (
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
)

// familyHandlers fans the informers' events out to the model of every IP family the
// proxy runs, and tells the health server and the sync runner that work is queued.
// It implements the handler interfaces of internal/watch.
type familyHandlers struct {
	families map[v1.IPFamily]*familyProxier
	primary  v1.IPFamily
	queued   func(family v1.IPFamily) // health: an update is queued
	trigger  func()                   // ask the sync runner for a sync
	metrics  *metrics.Metrics
	now      func() time.Time

	mu             sync.Mutex
	servicesSynced bool
	slicesSynced   bool
	onSynced       func()
}

// familyProxier is what the handlers need of one family's proxier.
type familyProxier struct {
	state          *model.State
	setServiceCIDR func([]netip.Prefix)
}

// changed records one event: the change counters, the queued update of every family
// (for /healthz) and a sync request.
func (h *familyHandlers) changed(serviceChange bool) {
	if h.metrics != nil {
		// Every family sees the same events, so the primary's counts stand for all.
		services, endpoints := h.families[h.primary].state.Pending()
		if serviceChange {
			h.metrics.ServiceChanged(services)
		} else {
			h.metrics.EndpointsChanged(endpoints)
		}
	}
	now := h.now()
	for family := range h.families {
		h.queued(family)
		if h.metrics != nil {
			h.metrics.Family(family).SetLastQueued(now)
		}
	}
	h.trigger()
}

// apply runs one event on the model of every family and records the change.
func (h *familyHandlers) apply(serviceChange bool, event func(*model.State)) {
	for _, fp := range h.families {
		event(fp.state)
	}
	h.changed(serviceChange)
}

func (h *familyHandlers) OnServiceAdd(svc *v1.Service) {
	h.apply(true, func(s *model.State) { s.OnServiceAdd(svc) })
}

func (h *familyHandlers) OnServiceUpdate(old, svc *v1.Service) {
	h.apply(true, func(s *model.State) { s.OnServiceUpdate(old, svc) })
}

func (h *familyHandlers) OnServiceDelete(svc *v1.Service) {
	h.apply(true, func(s *model.State) { s.OnServiceDelete(svc) })
}

func (h *familyHandlers) OnServiceSynced() { h.synced(func() { h.servicesSynced = true }) }

func (h *familyHandlers) OnEndpointSliceAdd(slice *model.EndpointSlice) {
	h.apply(false, func(s *model.State) { s.OnEndpointSliceAdd(slice) })
}

func (h *familyHandlers) OnEndpointSliceUpdate(old, slice *model.EndpointSlice) {
	h.apply(false, func(s *model.State) { s.OnEndpointSliceUpdate(old, slice) })
}

func (h *familyHandlers) OnEndpointSliceDelete(slice *model.EndpointSlice) {
	h.apply(false, func(s *model.State) { s.OnEndpointSliceDelete(slice) })
}

func (h *familyHandlers) OnEndpointSlicesSynced() { h.synced(func() { h.slicesSynced = true }) }

// synced records one informer's initial sync; once Services and EndpointSlices
// have both synced, onSynced lets the sync runner start (as upstream, no rules are
// written from a partial view of the cluster).
func (h *familyHandlers) synced(mark func()) {
	h.mu.Lock()
	mark()
	ready := h.servicesSynced && h.slicesSynced && h.onSynced != nil
	onSynced := h.onSynced
	if ready {
		h.onSynced = nil
	}
	h.mu.Unlock()
	if ready {
		onSynced()
	}
}

func (h *familyHandlers) OnTopologyChange(labels map[string]string) {
	h.apply(false, func(s *model.State) { s.OnNodeTopologyChange(labels) })
}

func (h *familyHandlers) OnServiceCIDRsChanged(cidrs []string) {
	byFamily := map[v1.IPFamily][]netip.Prefix{}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			continue // validated by the API server; nothing sensible to program
		}
		family := v1.IPv4Protocol
		if p.Addr().Is6() {
			family = v1.IPv6Protocol
		}
		byFamily[family] = append(byFamily[family], p.Masked())
	}
	for family, fp := range h.families {
		fp.setServiceCIDR(byFamily[family])
	}
	h.trigger()
}
