package inspect

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/model"
)

// ServiceSearch is one page of the Services whose "namespace/name" contains a
// query, with how many match and how many there are.
type ServiceSearch struct {
	List *ServiceList
	// Matched counts the Services that match, Total every Service of every family.
	Matched, Total int
}

// SearchServices returns the Services whose "namespace/name" contains query
// (ignoring case; every Service when empty) and sorts after the continue token
// after, at most limit of them (DefaultLimit when 0, at most MaxLimit), in the
// order and form of BuildServiceList. Only the page's ports are summarised: the
// rest of the work is over names, so a search of 30,000 Services costs a sort of
// their names, not their explanation.
func SearchServices(families []Family, query, after string, limit int) *ServiceSearch {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	query = strings.ToLower(query)

	var all []types.NamespacedName
	for i := range families {
		st := families[i].State
		st.Inspect(func() {
			for _, name := range st.ServicePortNames() {
				if n := len(all); n == 0 || all[n-1] != name.NamespacedName {
					all = append(all, name.NamespacedName)
				}
			}
		})
	}
	slices.SortFunc(all, compareKeys)
	all = slices.Compact(all)

	out := &ServiceSearch{List: &ServiceList{APIVersion: APIVersion, Kind: "ServiceList", Items: []ServiceSummary{}}, Total: len(all)}
	var page []types.NamespacedName
	for _, name := range all {
		key := name.String()
		if query != "" && !strings.Contains(strings.ToLower(key), query) {
			continue
		}
		out.Matched++
		if after != "" && key <= after {
			continue
		}
		if len(page) == limit {
			out.List.Continue = page[len(page)-1].String()
			continue
		}
		page = append(page, name)
	}

	for _, name := range page {
		out.List.Items = append(out.List.Items, ServiceSummary{Namespace: name.Namespace, Name: name.Name, Ports: []PortSummary{}})
	}
	for i := range families {
		st := families[i].State
		st.Inspect(func() {
			names := st.ServicePortNames()
			for j, name := range page {
				item := &out.List.Items[j]
				// ServicePortNames sorts by namespace, then name: a Service's ports
				// are contiguous.
				start, _ := slices.BinarySearchFunc(names, name, func(n model.ServicePortName, target types.NamespacedName) int {
					return cmp.Or(cmp.Compare(n.Namespace, target.Namespace), cmp.Compare(n.Name, target.Name))
				})
				for _, spn := range names[start:] {
					if spn.NamespacedName != name {
						break
					}
					view := st.View(spn)
					item.Ports = append(item.Ports, PortSummary{
						PortID:    portOf(st, view.ServicePort),
						Endpoints: len(st.Endpoints(spn)), Usable: len(view.AllReachableEndpoints),
					})
				}
			}
		})
	}
	// Within a Service, by family, then port name, as BuildServiceList.
	for j := range out.List.Items {
		slices.SortStableFunc(out.List.Items[j].Ports, func(a, b PortSummary) int {
			return cmp.Or(cmp.Compare(a.Family, b.Family), cmp.Compare(a.Name, b.Name))
		})
	}
	return out
}

// compareKeys orders Services as their "namespace/name" strings sort, the order of
// BuildServiceList and of the continue tokens.
func compareKeys(a, b types.NamespacedName) int {
	return cmp.Compare(a.String(), b.String())
}
