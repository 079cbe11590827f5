package nftables

import (
	"runtime"
	"testing"
	"weak"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
)

// TestReplacedFragmentIsCollected: once a partial sync has replaced a Service's
// fragment, nothing in the State keeps the old one alive, in particular not the
// fragments the full sync rendered beside it (they once shared one array, which
// held every replaced fragment until all of them were replaced).
func TestReplacedFragmentIsCollected(t *testing.T) {
	cfg := testConfig(knftables.IPv4Family)
	views := []*model.ServicePortView{scaleView(0, 3), scaleView(1, 3), scaleView(2, 3)}
	base := RenderBase(cfg)
	st := NewState(&base, RenderServices(cfg, views))

	name := views[1].Name
	oldElements := weak.Make(&st.Service(name).Elements[0])
	oldFragment := weak.Make(st.Service(name))

	changed := view(views[1].ServicePort, ep("10.200.0.1", 8080, false))
	f := RenderService(cfg, changed)
	st.Commit(st.Plan(nil, map[model.ServicePortName]*Fragment{name: &f}, PlanOptions{}))

	runtime.GC()
	if oldElements.Value() != nil || oldFragment.Value() != nil {
		t.Errorf("the replaced fragment of %s is still reachable after a collection (elements %t, fragment %t): "+
			"something in the State keeps it alive", name, oldElements.Value() != nil, oldFragment.Value() != nil)
	}
	if got := st.Service(name); got != &f {
		t.Fatalf("the State holds %p for %s, want the new fragment %p", got, name, &f)
	}
	runtime.KeepAlive(st)
}
