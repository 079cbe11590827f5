package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/test/lab"
)

// SyncResult is the outcome of one initial-sync measurement.
type SyncResult struct {
	Duration   time.Duration // process start until every check passed (or the cap)
	Probes     time.Duration // until every sampled ClusterIP answered
	Elements   time.Duration // until the kernel held a rule for every Service (CountServices)
	Capped     bool
	CPUSeconds float64 // at Duration
}

// ProbeTimeout bounds one probe of the sync and change checks.
const ProbeTimeout = 200 * time.Millisecond

// WaitSynced waits until the kernel in node1 forwards to every one of n Services: every
// sampled ClusterIP answers a TCP probe from client, and the kernel holds a rule for at
// least n Services in r's mode (CountServices). It gives up at limit after r started.
func WaitSynced(ctx context.Context, l *lab.Lab, r *Running, client *lab.Pod, sample []*Svc, n int, limit time.Duration) (SyncResult, error) {
	logger := klog.FromContext(ctx)
	deadline := r.Started.Add(limit)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	var res SyncResult
	var wg sync.WaitGroup
	var probesDone, elemsDone time.Time
	var last elementCount
	probed := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(probed)
		probesDone = waitProbes(ctx, func(ctx context.Context, s *Svc) bool { return probeAnswers(ctx, client, s) }, sample)
	}()
	go func() {
		defer wg.Done()
		elemsDone, last = waitElements(ctx, func(ctx context.Context) (int, error) { return CountServices(ctx, l.Node1.NS, r.Mode) }, n, probed)
	}()
	exited := make(chan struct{})
	go func() {
		select {
		case <-r.Process.Done():
			cancel()
		case <-ctx.Done():
		}
		close(exited)
	}()
	wg.Wait()
	res.CPUSeconds = r.CPU()
	cancel()
	<-exited
	if werr := r.Process.ExitReason(); werr != nil {
		return res, fmt.Errorf("%s exited during the initial sync (%w); log tail:\n%s", r.Proxy.Name, werr, r.Process.LogTail(30))
	}
	if probesDone.IsZero() || elemsDone.IsZero() {
		res.Capped = true
		res.Duration = limit
		logger.Info("Initial sync not done within the cap", "proxy", r.Proxy.Name, "services", n, "cap", limit,
			"probesDone", !probesDone.IsZero(), "elementsDone", !elemsDone.IsZero(), "lastCount", last.n, "lastCountErr", last.err)
		return res, nil
	}
	res.Probes = probesDone.Sub(r.Started)
	res.Elements = elemsDone.Sub(r.Started)
	res.Duration = max(res.Probes, res.Elements)
	return res, nil
}

// waitProbes returns when every sampled Service answered (zero time when ctx ended
// first). It watches one unanswered Service closely, starting a probe of it every
// sentinelInterval, and once that one answers probes every unanswered one in a round
// (concurrently); those that did not answer are watched the same way. A proxy that
// programs its Services in one transaction (the nftables mode's full sync, the
// iptables mode's restore) is then seen within sentinelInterval plus a round trip.
//
// Why not rounds of the whole sample: a probe of a ClusterIP not yet programmed
// waits out ProbeTimeout, so rounds came every 200 ms, and a sync was seen 0 to 200
// ms after it ended (100 ms on average: 5% of a 2 s sync). Probing the whole sample
// every sentinelInterval would cost the proxy being measured CPU; one Service does not.
func waitProbes(ctx context.Context, probe func(context.Context, *Svc) bool, sample []*Svc) time.Time {
	pending := append([]*Svc(nil), sample...)
	for {
		if !waitAnswers(ctx, probe, pending[0]) {
			return time.Time{}
		}
		ok := make([]bool, len(pending))
		var wg sync.WaitGroup
		for i, s := range pending {
			wg.Go(func() { ok[i] = probe(ctx, s) })
		}
		wg.Wait()
		now := time.Now()
		var still []*Svc
		for i, s := range pending {
			if !ok[i] {
				still = append(still, s)
			}
		}
		if pending = still; len(pending) == 0 {
			return now
		}
	}
}

// sentinelInterval is how often waitAnswers starts a probe.
const sentinelInterval = 20 * time.Millisecond

// waitAnswers starts a probe of s every sentinelInterval (each waits up to
// ProbeTimeout, so several are in flight) until one answers, and reports whether one
// did before ctx ended. The probes still in flight are cancelled and waited for.
func waitAnswers(ctx context.Context, probe func(context.Context, *Svc) bool, s *Svc) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(sentinelInterval)
	defer tick.Stop()
	for {
		wg.Go(func() {
			if probe(ctx, s) {
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		})
		select {
		case <-answered:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// probeAnswers probes s's ClusterIP from client once.
func probeAnswers(ctx context.Context, client *lab.Pod, s *Svc) bool {
	res := client.NS.ProbeWith(ctx, lab.Probe{Protocol: v1.ProtocolTCP, Target: netip.AddrPortFrom(s.ClusterIP, ServicePort), Timeout: ProbeTimeout})
	return res.Outcome == lab.Answered
}

// waitElements returns when count (CountServices) reaches n (zero time when ctx ended first),
// with the last count and its error, which say why a capped sync was not seen.
//
// Until the probes all answered (probed closed) it reads the count every 100-250ms
// (four times the last dump's duration, within those bounds), so the checker's own
// cost stays small beside the proxy's. Once they have, the proxy has written its
// rules: a new reader starts at once and reads without pause, next to a dump that
// may be in flight (and may have read the table before the proxy's transaction), so
// that neither the check's interval nor a stale dump adds to the figure.
func waitElements(ctx context.Context, count func(context.Context) (int, error), n int, probed <-chan struct{}) (time.Time, elementCount) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan elementPoll, 2)
	go func() { results <- pollElements(ctx, count, n, probed) }()
	running := 1
	var last elementCount
	for {
		select {
		case r := <-results:
			running--
			last = r.last
			if !r.at.IsZero() {
				return r.at, r.last
			}
			if running == 0 && (probed == nil || ctx.Err() != nil) {
				return time.Time{}, last
			}
		case <-probed:
			probed = nil
			running++
			go func() { results <- pollElements(ctx, count, n, nil) }()
		}
	}
}

// elementPoll is the end of one pollElements: when the count reached n (zero when it
// did not) and the last count read.
type elementPoll struct {
	at   time.Time
	last elementCount
}

// pollElements reads count until it reaches n. With until non-nil it pauses
// between reads and stops, without a result, once until is closed; with until nil it
// reads without pause. It stops when ctx ends.
func pollElements(ctx context.Context, count func(context.Context) (int, error), n int, until <-chan struct{}) elementPoll {
	var last elementCount
	for {
		start := time.Now()
		c, err := count(ctx)
		now := time.Now()
		last = elementCount{c, err}
		if err == nil && c >= n {
			return elementPoll{now, last}
		}
		if until == nil {
			if ctx.Err() != nil {
				return elementPoll{last: last}
			}
			continue
		}
		// Bounded above too: a dump blocked behind the proxy's big transaction must not
		// stretch the next interval.
		wait := min(250*time.Millisecond, max(100*time.Millisecond, 4*now.Sub(start)))
		select {
		case <-ctx.Done():
			return elementPoll{last: last}
		case <-until:
			return elementPoll{last: last}
		case <-time.After(wait):
		}
	}
}

// elementCount is one CountServices result.
type elementCount struct {
	n   int
	err error
}

// CountServices counts the IPv4 Services the kernel in ns has a ClusterIP rule for, in
// mode: the elements of the nftables mode's service-ips map, the iptables mode's
// "cluster IP" rules in the nat table's KUBE-SERVICES chain, or the ipvs mode's IPv4
// virtual servers (the bench's Services have one port and no NodePort: one each).
func CountServices(ctx context.Context, ns *lab.NS, mode string) (int, error) {
	switch mode {
	case ModeIPTables:
		return ClusterIPRuleCount(ctx, ns)
	case ModeIPVS:
		return VirtualServerCount(ns)
	}
	return ServiceIPsCount(ctx, ns)
}

// VirtualServerCount counts the IPv4 IPVS virtual servers in ns, over netlink (a dump
// of the virtual servers only, not of their real servers).
func VirtualServerCount(ns *lab.NS) (int, error) {
	table := ipvs.New(ns.Path())
	defer func() { _ = table.Close() }()
	vss, err := table.VirtualServers()
	if err != nil {
		return 0, fmt.Errorf("virtual servers in %s: %w", ns, err)
	}
	n := 0
	for _, vs := range vss {
		if vs.Address.Is4() {
			n++
		}
	}
	return n, nil
}

// ClusterIPRuleCount counts the rules of chain KUBE-SERVICES in the IPv4 nat table
// whose comment ends in " cluster IP" (one per Service port with a ClusterIP, upstream's
// and kproxy's). It reads that chain only, over netlink from inside ns, from the nft
// tables the iptables-nft backend keeps (see IPTablesCommand): iptables-save of the nat
// table prints every rule of every chain (about 300,000 at 10,000 Services) and would
// spend, on every poll, CPU the proxy under measurement needs.
func ClusterIPRuleCount(ctx context.Context, ns *lab.NS) (int, error) {
	var n int
	err := ns.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		rules, err := c.GetRules(&nftables.Table{Name: "nat", Family: nftables.TableFamilyIPv4}, &nftables.Chain{Name: "KUBE-SERVICES"})
		if err != nil {
			return err
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if m, ok := e.(*expr.Match); ok && m.Name == "comment" {
					if c, ok := m.Info.(*xt.Comment); ok && strings.HasSuffix(string(*c), " cluster IP") {
						n++
					}
				}
			}
		}
		return nil
	})
	return n, err
}
