package iptables

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// CanaryChain is the chain upstream kube-proxy's iptables mode (and kproxy's)
// watches to notice that someone flushed the tables.
const CanaryChain Chain = "KUBE-PROXY-CANARY"

const (
	// flushTimeout bounds the wait for the other tables' canaries to vanish
	// once the first one has: a flush of several tables is not atomic.
	flushTimeout = 5 * time.Second
	// flushPoll is how often that wait looks.
	flushPoll = 100 * time.Millisecond
	// canaryDeleteTimeout bounds the removal of the canaries on the way out.
	canaryDeleteTimeout = 5 * time.Second
)

// Monitor creates the canary chain in each table and calls reload when one
// disappears (someone flushed the tables), checking every interval until ctx
// is done; it returns nil then, after deleting the canaries. It behaves like
// upstream's pkg/util/iptables Monitor:
//
//   - the canaries are (re)created first, retried every interval until every
//     table has one;
//   - every interval it checks the canary of tables[0] only; a check that
//     failed for a resource problem (the xtables lock) is not a flush;
//   - once that canary is gone it waits (up to 5 s, looking every 100 ms) for
//     the other tables' canaries to be gone too, so that reload does not run
//     in the middle of the flush, then calls reload and starts over.
//
// reload runs on Monitor's goroutine and should only request a sync.
func Monitor(ctx context.Context, ipt Interface, canary Chain, tables []Table, reload func(), interval time.Duration) error {
	return monitor(ctx, clock.RealClock{}, ipt, canary, tables, reload, interval)
}

func monitor(ctx context.Context, clk clock.Clock, ipt Interface, canary Chain, tables []Table, reload func(), interval time.Duration) error {
	if len(tables) == 0 {
		return errors.New("iptables monitor: no tables")
	}
	if interval <= 0 {
		return errors.New("iptables monitor: interval must be positive")
	}
	logger := klog.FromContext(ctx).WithValues("ipFamily", ipt.Family())
	defer deleteCanaries(ctx, ipt, canary, tables)
	for {
		for !ensureCanaries(ctx, logger, ipt, canary, tables) {
			if !sleep(ctx, clk, interval) {
				return nil
			}
		}
		for {
			if !sleep(ctx, clk, interval) {
				return nil
			}
			exists, err := ipt.ChainExists(ctx, tables[0], canary)
			if exists {
				continue
			}
			if err != nil && IsResourceError(err) {
				logger.Error(err, "Could not check for iptables canary", "table", tables[0], "chain", canary)
				continue
			}
			if ctx.Err() != nil {
				return nil // the check failed because we are stopping
			}
			break
		}
		logger.V(2).Info("IPTables canary deleted", "table", tables[0], "chain", canary)
		deadline := clk.Now().Add(flushTimeout)
		for !othersGone(ctx, ipt, canary, tables[1:]) {
			if !clk.Now().Before(deadline) {
				logger.Info("Inconsistent iptables state detected")
				break
			}
			if !sleep(ctx, clk, flushPoll) {
				return nil
			}
		}
		logger.V(2).Info("Reloading after iptables flush")
		reload()
	}
}

func ensureCanaries(ctx context.Context, logger klog.Logger, ipt Interface, canary Chain, tables []Table) bool {
	for _, table := range tables {
		if _, err := ipt.EnsureChain(ctx, table, canary); err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Could not set up iptables canary", "table", table, "chain", canary)
			}
			return false
		}
	}
	return true
}

// othersGone reports whether no table still has the canary; a check failing
// for a resource problem counts as "still there".
func othersGone(ctx context.Context, ipt Interface, canary Chain, tables []Table) bool {
	for _, table := range tables {
		if exists, err := ipt.ChainExists(ctx, table, canary); exists || (err != nil && IsResourceError(err)) {
			return false
		}
	}
	return true
}

// deleteCanaries removes the canaries when the monitor stops, as upstream's
// does; ctx is already done, so it runs on a fresh bounded context.
func deleteCanaries(ctx context.Context, ipt Interface, canary Chain, tables []Table) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), canaryDeleteTimeout)
	defer cancel()
	for _, table := range tables {
		if err := ipt.DeleteChain(ctx, table, canary); err != nil {
			klog.FromContext(ctx).V(2).Info("Could not delete iptables canary", "table", table, "chain", canary, "err", err)
		}
	}
}

// sleep waits d on clk, reporting false when ctx ended first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
