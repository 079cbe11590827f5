package reliability

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
)

// The churn soak's versions: the 10,000 Services for 30 minutes, reported per
// 5 minutes; the short one with the short versions' 100 Services for 2 minutes, per
// 30 s (see doc.go for why).
var (
	fullSoak  = SoakConfig{Services: 10000, Duration: 30 * time.Minute, Window: 5 * time.Minute, Rate: 50}
	shortSoak = SoakConfig{Services: shortServices, Duration: 2 * time.Minute, Window: 30 * time.Second, Rate: 50}
)

// soakLossBound is the share of kproxy's probes that may fail during the soak, each
// outage at most outageBound: the scenario 4 asks for stable memory,
// goroutines and latency under churn, not for no failed probe (scenarios 1 and 3
// do), and under churn in iptables mode both proxies lose a lone probe now and then
// (kproxy 1 of about 14,600 in each of two short runs, upstream up to 15 of about
// 13,000 in the reduced full one: docs/reliability.md, Results), whose cause is not
// known yet. Above it, or an outage over a second, fails the run.
const soakLossBound = 0.001

// iptablesSoakServices caps the soak's Services in iptables mode: iptables-nft 1.8.9
// takes minutes to restore a few thousand Services, and did not finish 10,000 within
// 10 minutes (docs/iptables.md), for upstream's restores and kproxy's full ones alike;
// the bench measures iptables mode at 1,000 for the same reason.
const iptablesSoakServices = 1000

// soakConfig is this version's soak with the environment's overrides.
func soakConfig() SoakConfig {
	c := shortSoak
	if full() {
		c = fullSoak
	}
	if n, err := strconv.Atoi(os.Getenv(SoakServicesEnv)); err == nil && n > 0 {
		c.Services = n
	}
	if d, err := time.ParseDuration(os.Getenv(SoakDurationEnv)); err == nil && d > 0 {
		c.Duration = d
	}
	if d, err := time.ParseDuration(os.Getenv(SoakWindowEnv)); err == nil && d > 0 {
		c.Window = d
	}
	return c
}

// soakIn is c for mode: capped at iptablesSoakServices in iptables mode.
func soakIn(c SoakConfig, mode string) SoakConfig {
	if mode == bench.ModeIPTables {
		c.Services = min(c.Services, iptablesSoakServices)
	}
	return c
}

// TestChurnSoak is scenario 4: 50 Service or EndpointSlice changes a second under
// probes, the change-to-programmed latency, RSS and goroutines reported per window.
// Its file sorts last, so in a run of the whole package it runs after the other
// scenarios: the World's Services only grow, and its 10,000 (full version) would slow
// their iptables-mode runs to minutes per start. For the same reason it runs the mode
// with fewer Services (iptables) first.
func TestChurnSoak(t *testing.T) {
	c := soakConfig()
	modes := slices.Clone(bench.Modes)
	slices.SortStableFunc(modes, func(a, b string) int { return cmp.Compare(soakIn(c, a).Services, soakIn(c, b).Services) })
	// Loading 10,000 Services takes a few minutes, a start at 10,000 a minute or two.
	timeout := c.Duration + 15*time.Minute
	runEachIn(t, modes, timeout, func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error) {
		return RunChurnSoak(ctx, w, p, mode, soakIn(c, mode))
	}, soakLossBound, func(t *testing.T, res Result) {
		s := res.Soak
		rssOK, gOK, p99OK := s.Verdicts()
		lo, hi := s.P99Range()
		if !rssOK {
			t.Errorf("kproxy's RSS grew by %.1f%% from the first minute (%s) to the last (%s; peaks of their readings, one a second), over the issue's %.0f%%",
				100*s.RSSGrowth(), bench.FmtMiB(s.RSSFirstMinute), bench.FmtMiB(s.RSSEnd), 100*rssGrowthBound)
		}
		if !gOK {
			t.Errorf("kproxy's goroutines went from %d after the first minute to %d at the end: not flat (at most %d more)",
				s.GoroutinesFirstMinute, s.GoroutinesEnd, goroutineSlack)
		}
		switch {
		case !p99OK && !s.P99Percentile():
			t.Logf("kproxy's p99 change-to-programmed latency per window ranged from %s to %s (not held to stability: a window measured fewer than %d changes, so its p99 is its slowest)",
				lo, hi, p99Samples)
		case !p99OK:
			t.Errorf("kproxy's p99 change-to-programmed latency per window ranged from %s to %s: not stable (at most %d× the lowest plus %s)",
				lo, hi, p99Factor, p99Floor)
		}
		if r := s.Rate; r < 0.9*float64(s.Target) {
			// The writers or the API server could not keep up: the soak was lighter than asked.
			t.Logf("the soak made %.1f changes/s of the %d asked (%d ticks skipped by busy writers)", r, s.Target, s.Skipped)
		}
	})
}
