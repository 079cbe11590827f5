package reliability

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// Environment of `make reliability` (see doc.go).
const (
	// VersionEnv=full runs the full versions of the scenarios.
	VersionEnv = "KPROXY_RELIABILITY"
	// RestartsEnv overrides the restarts per signal (a reduced full version).
	RestartsEnv = "KPROXY_RELIABILITY_RESTARTS"
	// OutEnv is the directory the results table is written to.
	OutEnv = "KPROXY_RELIABILITY_OUT"
	// SoakServicesEnv, SoakDurationEnv and SoakWindowEnv override the churn soak's
	// Services (in nftables mode; iptables mode has at most iptablesSoakServices), its
	// length and its windows (Go durations, multiples of 10 s): a reduced full version.
	SoakServicesEnv = "KPROXY_RELIABILITY_SOAK_SERVICES"
	SoakDurationEnv = "KPROXY_RELIABILITY_SOAK_DURATION"
	SoakWindowEnv   = "KPROXY_RELIABILITY_SOAK_WINDOW"
)

// Sizes of the versions.
const (
	fullServices, fullRestarts   = 1000, 20
	shortServices, shortRestarts = 100, 3
)

// The default pods: node1's first is the probe client; the four others are backends.
var suite = &labtest.Suite{}

var report = &Report{Started: time.Now(), LoadStart: LoadAvg()}

func TestMain(m *testing.M) {
	report.Version = version()
	report.Command = "go test " + strings.Join(os.Args[1:], " ")
	code := suite.Main(m)
	proxytest.RemoveBinary()
	if dir := os.Getenv(OutEnv); dir != "" && len(report.Results) > 0 {
		report.Machine = bench.Machine(context.Background())
		path, err := report.Write(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = 1
		} else {
			fmt.Fprintf(os.Stderr, "results written to %s\n", path)
		}
	}
	if len(report.Results) > 0 {
		fmt.Fprintln(os.Stderr, report.Markdown())
	}
	os.Exit(code)
}

func full() bool { return os.Getenv(VersionEnv) == "full" }

// restarts is the restarts per signal of this version.
func restarts() int {
	if n, err := strconv.Atoi(os.Getenv(RestartsEnv)); err == nil && n > 0 {
		return n
	}
	if full() {
		return fullRestarts
	}
	return shortRestarts
}

func services() int {
	if full() {
		return fullServices
	}
	return shortServices
}

// version names the version the run measured, for the table's header: "short" or
// "full", with what the environment changed. Each scenario's own sizes are
// in its rows (the scenario column and the notes), not here: a run of one scenario
// must not be headed by another's sizes.
func version() string {
	name, wantRestarts, wantSoak := "short", shortRestarts, shortSoak
	if full() {
		name, wantRestarts, wantSoak = "full", fullRestarts, fullSoak
	}
	var reduced []string
	if restarts() != wantRestarts {
		reduced = append(reduced, fmt.Sprintf("%d restarts per signal instead of %d", restarts(), wantRestarts))
	}
	if c := soakConfig(); c != wantSoak {
		reduced = append(reduced, fmt.Sprintf("churn soak of %d Services for %s in windows of %s instead of %d for %s in windows of %s",
			c.Services, c.Duration, c.Window, wantSoak.Services, wantSoak.Duration, wantSoak.Window))
	}
	if len(reduced) > 0 {
		return name + ", changed (" + strings.Join(reduced, "; ") + ")"
	}
	return name
}

var (
	worldOnce sync.Once
	world     *World
	worldErr  error
)

// setup returns the shared World and both proxies, or skips (fails under
// KPROXY_E2E_REQUIRED=1) when the lab or a binary is unavailable.
func setup(t *testing.T) (*World, []bench.Proxy) {
	t.Helper()
	l := suite.Lab(t)
	proxies, err := Proxies()
	if err != nil {
		if labtest.Required() {
			t.Fatalf("binaries unavailable and %s=1: %v", labtest.RequiredEnv, err)
		}
		t.Skip("binaries unavailable: " + err.Error())
	}
	worldOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// node1's own connections to ClusterIPs need a route (lab.AddGatewayRoutes).
		if worldErr = l.AddGatewayRoutes(ctx); worldErr != nil {
			return
		}
		world, worldErr = NewWorld(ctx, l)
		if worldErr == nil {
			worldErr = bench.CheckIPTablesBackend(ctx, l)
		}
	})
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return world, proxies
}

// outageBound is the longest outage the issue accepts of kproxy.
const outageBound = time.Second

// runEach runs scenario for every mode and proxy (kproxy first), records the results,
// and holds kproxy to the acceptance: no failed probe, no outage over a second,
// nothing lost. Upstream is measured the same way and only reported.
func runEach(t *testing.T, timeout time.Duration, scenario func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error)) {
	runEachIn(t, bench.Modes, timeout, scenario, 0, nil)
}

// runEachIn is runEach in modes, in that order. lossBound is the share of kproxy's
// probes that may fail, as long as no outage is over outageBound (0: none may);
// accept, when set, holds kproxy's completed result to the scenario's own bounds too.
func runEachIn(t *testing.T, modes []string, timeout time.Duration, scenario func(ctx context.Context, w *World, p bench.Proxy, mode string) (Result, error),
	lossBound float64, accept func(t *testing.T, res Result)) {
	w, proxies := setup(t)
	for _, mode := range modes {
		for _, p := range proxies {
			t.Run(mode+"/"+p.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				res, err := scenario(ctx, w, p, mode)
				if err != nil {
					res.Err = err.Error()
				}
				if len(res.Streams) > 0 {
					res.Notes += fmt.Sprintf("; slowest stream %.1f probes/s, longest pause in sending %s; the prober froze %d times, longest %s",
						res.MinRate(), fmtDur(res.MaxGap()), res.Freezes, fmtDur(res.LongestFreeze))
				}
				report.Add(res)
				out, stream := res.LongestOutage()
				t.Logf("%s %s: %d probes, %d failed, %d stalled, longest outage %s (%s), recovery %s, RSS %.0f→%.0f MiB, lost %q; %s",
					p.Name, mode, res.Sent(), res.Failed(), res.Stalled(), out, stream, res.Recovery(), res.RSSBefore, res.RSSAfter, res.Lost, res.Notes)
				for _, s := range res.Streams {
					if s.Failed > 0 || s.Stalled > 0 {
						t.Logf("  %s: %d of %d failed %v, %d stalled, longest outage %s, recovery %s", s.Name, s.Failed, s.Sent, s.Outcomes, s.Stalled, s.LongestOutage, s.Recovery)
					}
				}
				if p.Name != "kproxy" {
					if err != nil {
						t.Logf("upstream's run did not complete (reported, not a failure of kproxy): %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				lossOK := res.Failed() == 0 || float64(res.Failed()) <= lossBound*float64(res.Sent())
				if res.Failed() > 0 && lossOK && out <= outageBound {
					t.Logf("kproxy (%s mode): %d of %d probes failed, none in an outage over %s: within the scenario's %.2f%%",
						mode, res.Failed(), res.Sent(), outageBound, 100*lossBound)
				}
				if !lossOK || out > outageBound || res.Lost != "" {
					t.Errorf("kproxy (%s mode): %d failed probes, longest outage %s (%s), lost %q; want none, at most %s, nothing",
						mode, res.Failed(), out, stream, res.Lost, outageBound)
				}
				if r := res.MinRate(); r < 10 {
					// Each stream is scheduled at 20/s; less means this process was
					// starved (the pause is in the notes), not that the proxy did wrong.
					t.Logf("a stream ran at %.1f probes/s (scheduled at %.0f/s): the prober was starved", r, float64(time.Second)/float64(ProbeInterval))
				}
				if accept != nil {
					accept(t, res)
				}
			})
		}
	}
}
