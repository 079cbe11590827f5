package nftnetlink

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nft/nfttext"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// caseChains renders a case: the base fragment's chains, then each Service's.
func caseChains(tc *renderCase) (*render.Config, []render.Chain) {
	cfg, views := tc.build()
	base := render.RenderBase(cfg)
	chains := slices.Clone(base.Chains)
	for _, v := range views {
		f := render.RenderService(cfg, v)
		chains = append(chains, f.Chains...)
	}
	return cfg, chains
}

// TestTextReadsAsTypedRule: every rule of every renderer case, printed and read
// back by the text front end (nfttext.ParseRule, then Lower), is the typed rule
// the renderer built, so Run and RunScript send what RunOps sends for it (the
// batches themselves are pinned by TestBuildGolden and TestBuildOpsIsBuildScript).
func TestTextReadsAsTypedRule(t *testing.T) {
	for _, tc := range renderCases() {
		cfg, chains := caseChains(&tc)
		family := nft.IPv4
		if cfg.Family == knftables.IPv6Family {
			family = nft.IPv6
		}
		for _, c := range chains {
			for i := range c.Rules {
				r := &c.Rules[i]
				text := r.String()
				parsed, err := nfttext.ParseRule(text)
				if err != nil {
					t.Fatalf("%s: %s: %v", tc.name, text, err)
				}
				got, err := nfttext.Lower(parsed, family)
				if err != nil {
					t.Errorf("%s: %s: %v", tc.name, text, err)
					continue
				}
				if !got.Equal(r) {
					t.Errorf("%s: %s: read back as %s", tc.name, text, got.String())
				}
			}
		}
	}
}

// TestRenderCasesMatchGolden holds renderCases to the renderer's own: every
// expected-output file has a case, and the case renders exactly its rules.
func TestRenderCasesMatchGolden(t *testing.T) {
	files, err := filepath.Glob("../render/nftables/testdata/*.nft")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	covered := map[string]bool{}
	for _, tc := range renderCases() {
		name := goldenName(tc.name)
		covered[name] = true
		data, err := os.ReadFile(filepath.Join("../render/nftables/testdata", name))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var want []string
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "add rule ") {
				want = append(want, strings.TrimSuffix(line, "\n"))
			}
		}
		cfg, chains := caseChains(&tc)
		var got []string
		for _, c := range chains {
			for i := range c.Rules {
				got = append(got, "add rule "+string(cfg.Family)+" "+render.TableName+" "+c.Name+" "+c.Rules[i].String())
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the rules differ from %s:\ngot:\n%s\nwant:\n%s", tc.name, name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s: no case renders it", filepath.Base(f))
		}
	}
}

// TestEncodeRuleRejects: typed rules outside what nft accepts (or the encoder
// knows) fail, never encode something else.
func TestEncodeRuleRejects(t *testing.T) {
	daddr6 := []nft.Key{nft.Daddr(nft.IPv6)}
	tcpDport, _ := nft.Dport(nft.TCP)
	for _, r := range []nft.Rule{
		{},
		{Stmts: []nft.Stmt{nft.Match{Keys: daddr6, Value: nft.SetRef("s")}}},
		{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{tcpDport}, Value: nft.Num(80)}}},
		{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{nft.THDport}, Value: nft.Addr(netip4("10.0.0.1"))}}},
		{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{nft.L4Proto, nft.THDport}, Value: nft.Num(1)}}},
		{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{nft.CtStateKey}, Value: nft.CtStatusDNAT}}},
		{Stmts: []nft.Stmt{nft.VMap{Keys: []nft.Key{nft.FibDaddrType}, Map: "m"}}},
		{Stmts: []nft.Stmt{nft.DNAT{To: netipAP("[fd00::1]:80")}}},
		{Stmts: []nft.Stmt{nft.DNATMap{Family: nft.IPv6, Keys: []nft.Key{nft.Numgen(2)}, Map: "m"}}},
		{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Goto}}},
		{Stmts: []nft.Stmt{nft.Match{Keys: []nft.Key{nft.Numgen(0)}, Value: nft.Num(0)}}},
	} {
		var id uint32
		if _, err := encodeRule("ip", &r, func() uint32 { id++; return id }); err == nil {
			t.Errorf("%q: accepted", r.String())
		}
	}
}

func netip4(s string) netip.Addr      { return netip.MustParseAddr(s) }
func netipAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
