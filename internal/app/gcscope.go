package app

import (
	"runtime/debug"
	"sync"
)

// largeSyncGCPercent is the GC target during a full sync: while the whole table is
// rendered and its transaction built and sent. The rendered state (~30 MB at
// 10,000 Services) and the transaction (~17 MB of text, ~10 MB of netlink, plus
// marshalling garbage) come on top of the informer caches and the model; with the
// default GOGC=100 the heap may grow to twice what was live at the last
// collection, and that transient set the process's peak RSS. At 20% the run's
// peak above the live heap shrinks to a fifth (internal/nftnetlink
// BenchmarkMemoryFullSync10k) for ~0.1-0.3 s more CPU per full sync; partial syncs never
// pay for it.
const largeSyncGCPercent = 20

// gcScope lowers the process's GC target while at least one large transaction is in
// flight and restores the previous value when the last one ends. The GC target is
// process-wide, so the daemon owns it here (libraries only call the hook), and
// concurrent transactions share one scope. It never raises the target nor enables a
// disabled GC: GOGC=off or a lower GOGC set by the operator stands.
type gcScope struct {
	mu     sync.Mutex
	active int
	prev   int
}

// enter is the nftnetlink.Options.LargeTransaction hook and, through
// familyParams.fullSyncScope, the nftables proxier's FullSync hook (the two nest).
func (g *gcScope) enter(int) (done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active == 0 {
		g.prev = debug.SetGCPercent(largeSyncGCPercent)
		if g.prev < largeSyncGCPercent {
			debug.SetGCPercent(g.prev)
		}
	}
	g.active++
	return g.leave
}

func (g *gcScope) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 {
		debug.SetGCPercent(g.prev)
	}
}
