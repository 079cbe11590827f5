package dptest

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/model"
)

// CheckSyncReportsWrites checks what a proxier's Sync reports as written, which the
// sync runner's minSyncPeriod cooldown depends on (internal/syncer): the first sync
// writes, a sync with nothing new writes nothing, a changed endpoint writes, and
// the sync after it writes nothing again. sync is the proxier's Sync, state its
// model (IPv4).
func CheckSyncReportsWrites(t *testing.T, sync func(context.Context) (bool, error), state *model.State) {
	t.Helper()
	step := func(what string, want bool) {
		t.Helper()
		wrote, err := sync(context.Background())
		if err != nil {
			t.Fatalf("%s: Sync: %v", what, err)
		}
		if wrote != want {
			t.Errorf("%s: Sync reported wrote=%t, want %t", what, wrote, want)
		}
	}
	state.OnServiceAdd(Service("ns1", "web", "172.30.0.10", WithPort("http", v1.ProtocolTCP, 80, 8080)))
	old := Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.1.1", "node-b"))
	state.OnEndpointSliceAdd(old)
	step("first sync", true)
	step("nothing changed", false)
	state.OnEndpointSliceUpdate(old, Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, Ready("10.0.1.2", "node-b")))
	step("endpoint replaced", true)
	step("nothing changed since", false)
}
