package nftables

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/metrics"
	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

const (
	testNodeName = dptest.NodeName
	testNodeIP   = dptest.NodeIP
)

var errInjected = errors.New("injected nft failure")

// recordingNFT wraps the knftables Fake: it records the size of every transaction
// run and can fail the next Run calls without applying them (as a failed atomic nft
// transaction leaves the kernel unchanged).
type recordingNFT struct {
	*knftables.Fake
	mu         sync.Mutex
	operations []int
	failNext   int
	// failAll fails every Run while set (dptest.Fixture's FailNextSync).
	failAll bool
}

func (r *recordingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.mu.Lock()
	r.operations = append(r.operations, tx.NumOperations())
	fail := r.failNext > 0 || r.failAll
	if r.failNext > 0 {
		r.failNext--
	}
	r.mu.Unlock()
	if fail {
		return errInjected
	}
	return r.Fake.Run(ctx, tx)
}

// lastOperations returns the size of the last transaction run (0 when none).
func (r *recordingNFT) lastOperations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.operations) == 0 {
		return 0
	}
	return r.operations[len(r.operations)-1]
}

func (r *recordingNFT) runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.operations)
}

// fixture is a Proxier for IPv4 with every dependency faked.
type fixture struct {
	*dptest.Parts
	t       *testing.T
	proxier *Proxier
	nft     *recordingNFT
}

func testRenderConfig() render.Config {
	return render.Config{
		Family:            knftables.IPv4Family,
		NodePortAddresses: model.NodePortAddresses{IPs: []netip.Addr{netip.MustParseAddr(testNodeIP)}},
		LocalDetector:     model.LocalDetector{Mode: model.DetectClusterCIDR, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		MasqueradeBit:     14,
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
		NodeIP:            netip.MustParseAddr(testNodeIP),
		// The daemon's layout (internal/app): endpoints in shared maps.
		EndpointMaps: true,
	}
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, Parts: dptest.NewParts(t, metrics.ModeNFTables, testNodeName), nft: &recordingNFT{Fake: knftables.NewFake(knftables.IPv4Family, render.TableName)}}
	cfg := Config{Config: f.CoreConfig(), Render: testRenderConfig(), NFT: f.nft}
	for _, mut := range mutate {
		mut(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.proxier = p
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	if _, err := f.proxier.Sync(context.Background()); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

// expectedDump renders the model from scratch with cfg into a fresh Fake, as a full
// sync would program it.
func (f *fixture) expectedDump(cfg render.Config) string {
	f.t.Helper()
	fresh := knftables.NewFake(knftables.IPv4Family, render.TableName)
	base := render.RenderBase(&cfg)
	st := render.NewState(&base, render.RenderServices(&cfg, slices.Collect(f.State.Views())))
	tx := fresh.NewTransaction()
	render.WriteFull(tx, st)
	if err := fresh.Run(context.Background(), tx); err != nil {
		f.t.Fatalf("fresh full render: %v", err)
	}
	return normalizeDump(fresh.Dump())
}

// checkTableIsFullRender fails unless the table equals a fresh full render.
func (f *fixture) checkTableIsFullRender(cfg render.Config) {
	f.t.Helper()
	got, want := normalizeDump(f.nft.Dump()), f.expectedDump(cfg)
	if got != want {
		f.t.Errorf("table differs from a full render:\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// normalizeDump sorts element lines: the Fake keeps elements in insertion order, and
// the order of set/map elements has no meaning. Everything else keeps its order.
func normalizeDump(dump string) string {
	var other, elements []string
	for _, line := range strings.Split(strings.TrimSpace(dump), "\n") {
		if strings.HasPrefix(line, "add element ") {
			elements = append(elements, line)
		} else {
			other = append(other, line)
		}
	}
	slices.Sort(elements)
	return strings.Join(append(other, elements...), "\n")
}

// Metric readers.

// metricValue returns the value of the counter or gauge name with the given labels
// (0 when the series does not exist).
func (f *fixture) metricValue(name string, labels map[string]string) float64 {
	return dptest.Value(f.t, f.Registry, name, labels)
}

// histogram returns the sample count and sum of a histogram series.
func (f *fixture) histogram(name string, labels map[string]string) (uint64, float64) {
	return dptest.Histogram(f.t, f.Registry, name, labels)
}
