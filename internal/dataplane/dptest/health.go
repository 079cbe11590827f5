package dptest

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Health records a proxier's Updated calls per family (its HealthUpdater).
type Health struct {
	mu      sync.Mutex
	updated map[v1.IPFamily]int
}

// Updated implements the proxiers' HealthUpdater.
func (h *Health) Updated(family v1.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.updated == nil {
		h.updated = map[v1.IPFamily]int{}
	}
	h.updated[family]++
}

// Count returns how many times family was reported updated.
func (h *Health) Count(family v1.IPFamily) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.updated[family]
}

// ServiceHealth records the arguments of every call of a proxier to its service
// health check server, and fails them with Err when set.
type ServiceHealth struct {
	Services  []map[types.NamespacedName]uint16
	Endpoints []map[types.NamespacedName]int
	Err       error
}

// SyncServices records m.
func (f *ServiceHealth) SyncServices(m map[types.NamespacedName]uint16) error {
	f.Services = append(f.Services, m)
	return f.Err
}

// SyncEndpoints records m.
func (f *ServiceHealth) SyncEndpoints(m map[types.NamespacedName]int) error {
	f.Endpoints = append(f.Endpoints, m)
	return f.Err
}
