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
