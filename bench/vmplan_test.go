package bench

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestVMPlanConfig(t *testing.T) {
	host := Config{
		Proxies:        []Proxy{{Name: "kproxy"}, {Name: "upstream"}},
		Modes:          []string{ModeNFTables, ModeIPTables},
		Sizes:          []int{1000, 10000},
		Scenarios:      []string{ScenarioSync, ScenarioChange, ScenarioDataplane, ScenarioStateAPI},
		DataplaneSizes: []int{0, 1000},
		Cap:            5 * time.Minute,
		HeapProfileDir: "/results",
		VM:             &VMPlan{Modes: []string{ModeIPVS}, Sizes: []int{1000, 2000}, Repeat: 3, Changes: 50},
	}
	small := host.VM.Config(host, ModeIPVS, 1000)
	if !slices.Equal(small.Modes, []string{ModeIPVS}) || !slices.Equal(small.Sizes, []int{1000}) || small.VM != nil ||
		small.DataplaneSizes != nil || small.HeapProfileDir != "" || small.Repeat != 3 || small.Changes != 50 {
		t.Errorf("VM config at 1000 = %+v", small)
	}
	if !slices.Equal(small.Scenarios, []string{ScenarioSync}) {
		t.Errorf("scenarios at 1000 = %v, want sync only (changes at the largest size)", small.Scenarios)
	}
	if large := host.VM.Config(host, ModeIPVS, 2000); !slices.Equal(large.Scenarios, []string{ScenarioSync, ScenarioChange}) || large.ChangeSize != 2000 {
		t.Errorf("VM config at 2000: scenarios %v, change size %d", large.Scenarios, large.ChangeSize)
	}
	if got := host.VM.modesAt(10000); got != nil {
		t.Errorf("VM modes at 10000 = %v, want none", got)
	}
	host.VM.ChangeSize = 250
	if got := host.VM.sizes(); !slices.Equal(got, []int{250, 1000, 2000}) {
		t.Errorf("VM sizes with ChangeSize 250 = %v", got)
	}
	if c := host.VM.Config(host, ModeIPVS, 250); !slices.Contains(c.Scenarios, ScenarioChange) || slices.Contains(host.VM.Config(host, ModeIPVS, 2000).Scenarios, ScenarioChange) {
		t.Errorf("the change series is not at ChangeSize 250 only")
	}
	var none *VMPlan
	if none.sizes() != nil || none.modesAt(1000) != nil {
		t.Error("a nil plan has sizes")
	}
}

// The worker's command line is what the main command parses back: every setting the
// VM run needs is on it.
func TestWorkerArgs(t *testing.T) {
	c := Config{Scenarios: []string{ScenarioSync, ScenarioChange}, Repeat: 3, Changes: 50, ChangeSize: 1000,
		GapDefault: 1100 * time.Millisecond, GapZero: 100 * time.Millisecond, Cap: 5 * time.Minute, SampleSize: 50}
	got := strings.Join(WorkerArgs(c, ModeIPVS, 1000), " ")
	for _, want := range []string{"--vm-worker", "--modes=ipvs", "--services=1000", "--scenarios=sync,change",
		"--repeat=3", "--changes=50", "--change-gap-zero=100ms", "--cap=5m0s", "--kproxy=" + vmKproxyPath, "--upstream=" + vmUpstreamPath} {
		if !strings.Contains(got, want) {
			t.Errorf("worker args %q lack %q", got, want)
		}
	}
}

func TestVMFiguresRoundTrip(t *testing.T) {
	f := &Figures{ChangeZero: &ChangeResult{Latencies: []time.Duration{time.Second}}}
	f.Sync.Add(24.2, false)
	b, err := json.Marshal(map[string]*Figures{"kproxy": f})
	if err != nil {
		t.Fatal(err)
	}
	out := "log line\n" + VMFiguresPrefix + string(b) + "\n"
	got, err := parseVMFigures(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if k := got["kproxy"]; k == nil || k.Sync.Values[0] != 24.2 || k.ChangeZero.Latencies[0] != time.Second {
		t.Errorf("figures = %+v", got)
	}
	if _, err := parseVMFigures(strings.NewReader("nothing\n")); err == nil {
		t.Error("no figures line: no error")
	}
}

func TestVMRowsAreRatiosOnly(t *testing.T) {
	r := &Results{
		Config: Config{
			Proxies: []Proxy{{Name: "kproxy"}, {Name: "upstream"}},
			Modes:   []string{ModeNFTables},
			Cap:     5 * time.Minute,
			VM:      &VMPlan{Modes: []string{ModeIPVS}, Sizes: []int{1000}, Repeat: 3, Changes: 50},
		},
		Figures:  map[string]map[int]map[string]*Figures{},
		VMKernel: "6.1.0-57-amd64",
	}
	r.fig(ModeNFTables, 1000, "kproxy").Sync.Add(1, false)
	r.fig(ModeNFTables, 1000, "upstream").Sync.Add(4, false)
	r.fig(ModeIPVS, 1000, "kproxy").Sync.Add(24, false)
	r.fig(ModeIPVS, 1000, "upstream").Sync.Add(48, false)
	table := r.Table()
	if !strings.Contains(table, "| ipvs (6.1 VM, TCG: ratios only) | initial sync, S×10 endpoints (cap 5m0s) | 1k | (VM) | (VM) | 0.50 |") {
		t.Errorf("no ratio-only ipvs row:\n%s", table)
	}
	if strings.Contains(table, "24.00s") || !strings.Contains(table, "| nftables | initial sync, S×10 endpoints (cap 5m0s) | 1k | 1.00s | 4.00s | 0.25 |") {
		t.Errorf("host rows wrong or VM absolutes shown:\n%s", table)
	}
	if md := r.Markdown("machine", "cmd"); !strings.Contains(md, "Debian 12's kernel 6.1.0-57-amd64 in qemu under TCG") {
		t.Errorf("no VM note in the report:\n%s", md)
	}
}
