package bench

import (
	"strings"
	"testing"
	"time"
)

func TestTableHasOneBlockPerMode(t *testing.T) {
	r := &Results{
		Config: Config{
			Proxies: []Proxy{{Name: "kproxy"}, {Name: "upstream"}},
			Modes:   []string{ModeNFTables, ModeIPTables},
			Cap:     5 * time.Minute,
		},
		Figures: map[string]map[int]map[string]*Figures{},
	}
	for i, mode := range []string{ModeIPTables, ModeNFTables} {
		for j, proxy := range []string{"kproxy", "upstream"} {
			f := r.fig(mode, 1000, proxy)
			f.Sync.Add(float64(1+i+j), false)
		}
	}
	r.fig(ModeIPTables, 1000, "upstream").Errors = []string{"boom\ndetails"}
	table := r.Table()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !strings.HasPrefix(lines[0], "| mode | metric | Services | kproxy | upstream | kproxy/upstream |") {
		t.Fatalf("header %q", lines[0])
	}
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want a header, a separator and one row per mode:\n%s", len(lines), table)
	}
	// Configured order: nftables first.
	if !strings.HasPrefix(lines[2], "| nftables | initial sync") || !strings.HasPrefix(lines[3], "| iptables | initial sync") {
		t.Errorf("rows out of mode order:\n%s", table)
	}
	if errs := r.Errors(); len(errs) != 1 || errs[0] != "upstream (iptables mode) at 1k Services: boom" {
		t.Errorf("Errors() = %q", errs)
	}
}
