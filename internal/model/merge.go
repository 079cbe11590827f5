package model

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Merge folds later, the Update of the Commit that followed u's, into u, so that u
// describes both Commits as one: a caller may Commit early (e.g. while the
// informers are still listing, to spread the conversion work) and apply the
// merged Update at its next sync. A ServicePort changed by one and deleted by the
// other ends in the list of the later event; one deleted and then added again is
// Changed. Problems, stale endpoints, deleted UDP ports and trigger times
// accumulate; the health check node ports are later's, changed if either changed.
func (u *Update) Merge(later *Update) {
	changed := nameSet(u.Changed)
	deleted := nameSet(u.Deleted)
	for _, n := range later.Deleted {
		delete(changed, n)
		deleted[n] = struct{}{}
	}
	for _, n := range later.Changed {
		delete(deleted, n)
		changed[n] = struct{}{}
	}
	u.Changed = sortedNames(changed)
	u.Deleted = sortedNames(deleted)

	updated := make(map[types.NamespacedName]struct{}, len(u.UpdatedServices)+len(later.UpdatedServices))
	for _, n := range slices.Concat(u.UpdatedServices, later.UpdatedServices) {
		updated[n] = struct{}{}
	}
	u.UpdatedServices = slices.SortedFunc(maps.Keys(updated), compareNames)

	u.ConntrackCleanupRequired = u.ConntrackCleanupRequired || later.ConntrackCleanupRequired
	u.DeletedUDPServicePorts = append(u.DeletedUDPServicePorts, later.DeletedUDPServicePorts...)
	slices.SortStableFunc(u.DeletedUDPServicePorts, func(a, b *ServicePort) int { return CompareServicePortNames(a.Name, b.Name) })
	if u.StaleUDPEndpoints == nil {
		u.StaleUDPEndpoints = map[ServicePortName][]*Endpoint{}
	}
	for n, eps := range later.StaleUDPEndpoints {
		u.StaleUDPEndpoints[n] = append(u.StaleUDPEndpoints[n], eps...)
	}
	u.UDPServicePortsGainedEndpoints = sortedNames(nameSet(slices.Concat(u.UDPServicePortsGainedEndpoints, later.UDPServicePortsGainedEndpoints)))

	if u.LastChangeTriggerTimes == nil {
		u.LastChangeTriggerTimes = map[types.NamespacedName][]time.Time{}
	}
	for n, times := range later.LastChangeTriggerTimes {
		merged := append(u.LastChangeTriggerTimes[n], times...)
		slices.SortFunc(merged, time.Time.Compare)
		u.LastChangeTriggerTimes[n] = merged
	}

	u.HealthCheckNodePortsChanged = u.HealthCheckNodePortsChanged || later.HealthCheckNodePortsChanged
	u.HealthCheckNodePorts = later.HealthCheckNodePorts
	if u.LocalReadyEndpoints == nil {
		u.LocalReadyEndpoints = map[types.NamespacedName]int{}
	}
	maps.Copy(u.LocalReadyEndpoints, later.LocalReadyEndpoints)

	u.ZoneChanged = u.ZoneChanged || later.ZoneChanged
	u.ServiceEvents += later.ServiceEvents
	u.EndpointSliceEvents += later.EndpointSliceEvents
	u.Problems = append(u.Problems, later.Problems...)
}

func nameSet(names []ServicePortName) map[ServicePortName]struct{} {
	set := make(map[ServicePortName]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set
}

func sortedNames(set map[ServicePortName]struct{}) []ServicePortName {
	if len(set) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Keys(set), CompareServicePortNames)
}

// Precommitter commits a State for a proxier that may commit ahead of its first
// sync: while the informers list tens of thousands of objects the CPU mostly waits
// for the API server, and converting what has arrived then takes the conversion off
// the first sync's critical path. Precommit commits and keeps the Update until the
// first Commit, which returns it merged with its own; after that, Precommit does
// nothing. Both must be called from the sync goroutine.
type Precommitter struct {
	State  *State
	early  *Update
	synced bool
}

// Precommit commits the pending changes ahead of the first sync.
func (c *Precommitter) Precommit() {
	if c.synced {
		return
	}
	update := c.State.Commit()
	if c.early == nil {
		c.early = update
		return
	}
	c.early.Merge(update)
}

// Commit commits the pending changes for a sync, with those of earlier Precommits.
func (c *Precommitter) Commit() *Update {
	c.synced = true
	update := c.State.Commit()
	if c.early != nil {
		c.early.Merge(update)
		update, c.early = c.early, nil
	}
	return update
}
