package ipvs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultSweepInterval is how often Run retries the removal of terminating
// real servers: upstream's rsCheckDeleteInterval.
const DefaultSweepInterval = time.Minute

// Terminating names a real server of a virtual server that is being removed.
type Terminating struct {
	Key        Key
	RealServer netip.AddrPort
}

// String is upstream's unique real server name: "10.96.0.1:80/TCP/10.0.0.1:8080"
// (GetUniqueRSName).
func (t Terminating) String() string {
	return fmt.Sprintf("%s/%s/%s", netip.AddrPortFrom(t.Key.Address, t.Key.Port), t.Key.Protocol, t.RealServer)
}

// GracefulTermination removes real servers the way upstream's
// GracefulTerminationManager does: a TCP real server that still has
// connections gets weight 0, so that the scheduler sends it no new ones, and
// is deleted by a later Sweep once its active and inactive connections are 0;
// UDP and SCTP real servers, and TCP ones without connections, are deleted at
// once. While a real server is terminating, the proxier neither re-adds nor
// re-weights it (InTerminationList); if its endpoint comes back, Cancel
// deletes it so that the proxier adds it afresh, as upstream does.
//
// It starts no goroutine: Run sweeps every interval until its context ends.
// It is safe for concurrent use; a sweep holds the lock across its kernel
// calls, so that a Cancel or Delete never interleaves with it.
type GracefulTermination struct {
	ipvs     Interface
	clock    clock.WithTicker
	interval time.Duration

	mu      sync.Mutex
	pending map[Terminating]struct{}
	// afterSweep, when set (tests), is called after each of Run's sweeps.
	afterSweep func()
}

// NewGracefulTermination returns a GracefulTermination over ipvs that Run
// sweeps every interval (DefaultSweepInterval if 0), timed by clk (nil: the
// real clock).
func NewGracefulTermination(ipvs Interface, clk clock.WithTicker, interval time.Duration) *GracefulTermination {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	return &GracefulTermination{ipvs: ipvs, clock: clk, interval: interval, pending: map[Terminating]struct{}{}}
}

// Delete removes rs from the virtual server k: at once when it can go now,
// else by setting its weight to 0 and remembering it for later sweeps
// (upstream's GracefulDeleteRS). A real server already terminating is left
// as it is.
func (g *GracefulTermination) Delete(k Key, rs netip.AddrPort) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := Terminating{Key: k, RealServer: rs}
	if _, ok := g.pending[t]; ok {
		return nil
	}
	deleted, tryErr := g.tryDelete(t)
	if deleted {
		return tryErr
	}
	// As upstream, a failed attempt (say, the listing failed) still
	// quiesces the real server: the weight is what stops new connections.
	if err := g.ipvs.UpdateRealServer(k, RealServer{Address: rs.Addr(), Port: rs.Port(), Weight: 0}); err != nil {
		return errors.Join(tryErr, fmt.Errorf("graceful termination of %s: setting weight 0: %w", t, err))
	}
	g.pending[t] = struct{}{}
	return tryErr
}

// InTerminationList reports whether rs of k is terminating.
func (g *GracefulTermination) InTerminationList(k Key, rs netip.AddrPort) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.pending[Terminating{Key: k, RealServer: rs}]
	return ok
}

// Cancel ends the termination of rs of k, whose endpoint is wanted again: it
// deletes the real server now and forgets it, so that the caller adds it
// back with the weight it wants (upstream's MoveRSOutofGracefulDeleteList).
// A real server that is not terminating is an error, as upstream's.
func (g *GracefulTermination) Cancel(k Key, rs netip.AddrPort) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := Terminating{Key: k, RealServer: rs}
	if _, ok := g.pending[t]; !ok {
		return fmt.Errorf("real server %s is not terminating", t)
	}
	if err := g.ipvs.DeleteRealServer(k, rs); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("cancelling the termination of %s: %w", t, err)
	}
	delete(g.pending, t)
	return nil
}

// Pending returns the terminating real servers, sorted.
func (g *GracefulTermination) Pending() []Terminating {
	g.mu.Lock()
	defer g.mu.Unlock()
	return sortedTerminating(g.pending)
}

func sortedTerminating(m map[Terminating]struct{}) []Terminating {
	return slices.SortedFunc(maps.Keys(m), func(a, b Terminating) int {
		return cmp.Or(compareKeys(a.Key, b.Key), a.RealServer.Compare(b.RealServer))
	})
}

// Sweep tries once to delete every terminating real server, forgetting those
// that are gone; the error joins the failures (those stay pending).
func (g *GracefulTermination) Sweep() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, t := range sortedTerminating(g.pending) {
		deleted, err := g.tryDelete(t)
		if err != nil {
			errs = append(errs, err)
		}
		if deleted {
			delete(g.pending, t)
		}
	}
	return errors.Join(errs...)
}

// Run sweeps every interval until ctx is done, then returns nil. A failed
// sweep is logged (with ctx's logger) and retried at the next tick.
func (g *GracefulTermination) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ticker := g.clock.NewTicker(g.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		if err := g.Sweep(); err != nil {
			logger.Error(err, "Removing terminated IPVS real servers")
		}
		if g.afterSweep != nil {
			g.afterSweep()
		}
	}
}

// tryDelete deletes t's real server if it may go now (upstream's
// deleteRsFunc). deleted reports that it is gone, whether deleted now or
// already absent. g.mu is held.
//
// A real server that is no longer there (deleted by someone else, or with
// its virtual server, whose destinations the kernel then lists as none)
// counts as deleted; upstream forgets it too, reporting an error.
func (g *GracefulTermination) tryDelete(t Terminating) (deleted bool, err error) {
	rss, err := g.ipvs.RealServers(t.Key)
	if err != nil {
		return false, fmt.Errorf("graceful termination of %s: %w", t, err)
	}
	i := slices.IndexFunc(rss, func(rs RealServer) bool { return rs.AddrPort() == t.RealServer })
	if i < 0 {
		return true, nil
	}
	if rs := rss[i]; GracefulTerminationNeeded(t.Key.Protocol) && rs.ActiveConnections+rs.InactiveConnections != 0 {
		return false, nil
	}
	if err := g.ipvs.DeleteRealServer(t.Key, t.RealServer); err != nil && !errors.Is(err, ErrNotFound) {
		return false, fmt.Errorf("graceful termination of %s: %w", t, err)
	}
	return true, nil
}
