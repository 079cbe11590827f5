package reliability

import (
	"context"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
)

// scenarioRun is what a scenario's body works with: the world, the proxy under test
// (which a body that restarts it replaces), the probes, and the kernel's baseline.
type scenarioRun struct {
	w      *World
	p      bench.Proxy
	mode   string
	px     *proxytest.Proxy
	runner *Runner
	base   Baseline
}

// runScenario is the frame every scenario shares: it loads services bulk Services,
// starts p in mode until it has synced, waits for every probe target and a sample of
// the Services to answer, takes the kernel's baseline and the RSS, starts the probes,
// and runs body; then it waits for settleAnswers answers in every stream, stops the
// probes, and fills res (streams, RSS after, body's notes, and what was lost: the
// proxy exiting, or what World.Lost finds). The proxy is stopped and node1's
// dataplane emptied on every return path.
func runScenario(ctx context.Context, w *World, p bench.Proxy, mode string, services int, res *Result, body func(r *scenarioRun) (notes string, err error)) (err error) {
	if err := w.LoadTo(ctx, services); err != nil {
		return err
	}
	l := w.Lab
	r := &scenarioRun{w: w, p: p, mode: mode}
	if r.px, _, err = startSynced(ctx, l, p, mode); err != nil {
		return err
	}
	defer func() {
		if serr := stopAndReset(l, r.px); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := waitAnswering(ctx, append(w.Targets(), w.sampleTargets(services, 20)...)); err != nil {
		return err
	}
	if r.base, err = w.TakeBaseline(ctx, mode); err != nil {
		return err
	}
	res.RSSBefore = rss(r.px)

	r.runner = StartProbes(ctx, w.Targets())
	notes, runErr := body(r)
	if runErr == nil {
		runErr = r.runner.WaitAnswered(ctx, time.Now(), settleAnswers, answerTimeout)
	}
	stats, err := r.runner.Stop()
	if err != nil {
		return err
	}
	res.Streams = stats
	res.Freezes, res.LongestFreeze = r.runner.Freezes()
	res.RSSAfter = rss(r.px)
	res.Notes = notes
	if done, werr := r.px.Process.Exited(); done {
		res.Lost = fmt.Sprintf("the proxy exited (%v)", werr)
		return runErr
	}
	if runErr != nil {
		return runErr
	}
	res.Lost = w.Lost(ctx, mode, r.base, services)
	return nil
}
