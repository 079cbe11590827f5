package inspect

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// TestSearchServices: the query filters "namespace/name" ignoring case, the
// counts cover every match and every Service (once, whatever its families), and
// the pages follow BuildServiceList's order and continue tokens.
func TestSearchServices(t *testing.T) {
	families := testFamilies(t)
	// A second family with one of the same Services and namespaces whose
	// "namespace/name" order differs from namespace-then-name order ("a-b/x" sorts
	// before "a/x").
	v6 := model.NewState(v1.IPv6Protocol, testNode)
	for _, s := range []*v1.Service{
		service("default", "web", "fd00::10", nil), service("a", "x", "fd00::11", nil), service("a-b", "x", "fd00::12", nil),
	} {
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
		v6.OnServiceAdd(s)
	}
	v6.Commit()
	families = append(families, Family{State: v6})

	names := func(s *ServiceSearch) string {
		var out []string
		for _, item := range s.List.Items {
			var fams []string
			for _, p := range item.Ports {
				fams = append(fams, p.Family)
			}
			out = append(out, item.Namespace+"/"+item.Name+"("+strings.Join(fams, ",")+")")
		}
		return strings.Join(out, " ")
	}

	all := SearchServices(families, "", "", 0)
	if got, want := names(all), "a-b/x(IPv6) a/x(IPv6) default/empty(IPv4) default/local-only(IPv4) default/web(IPv4,IPv6) zones/hinted(IPv4)"; got != want {
		t.Errorf("everything: %s, want %s", got, want)
	}
	if all.Total != 6 || all.Matched != 6 || all.List.Continue != "" {
		t.Errorf("everything: total %d, matched %d, continue %q; want 6, 6, none", all.Total, all.Matched, all.List.Continue)
	}
	if got := names(BuildServiceListAsSearch(families)); got != names(all) {
		t.Errorf("BuildServiceList's order %s differs from the search's", got)
	}

	page := SearchServices(families, "DEFAULT/", "", 2)
	if got := names(page); got != "default/empty(IPv4) default/local-only(IPv4)" || page.Matched != 3 || page.Total != 6 || page.List.Continue != "default/local-only" {
		t.Errorf("first page of DEFAULT/: %s, matched %d, total %d, continue %q", got, page.Matched, page.Total, page.List.Continue)
	}
	page = SearchServices(families, "DEFAULT/", page.List.Continue, 2)
	if got := names(page); got != "default/web(IPv4,IPv6)" || page.Matched != 3 || page.List.Continue != "" {
		t.Errorf("second page of DEFAULT/: %s, matched %d, continue %q", got, page.Matched, page.List.Continue)
	}
	if none := SearchServices(families, "nothing", "", 0); len(none.List.Items) != 0 || none.Matched != 0 || none.Total != 6 {
		t.Errorf("no match: %+v", none)
	}
}

// BuildServiceListAsSearch wraps BuildServiceList's one page of everything for
// comparison.
func BuildServiceListAsSearch(families []Family) *ServiceSearch {
	return &ServiceSearch{List: BuildServiceList(families, "", "", 0)}
}
