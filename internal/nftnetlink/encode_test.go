package nftnetlink

import (
	"bytes"
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

// ruleMessages writes a compiled rule (its anonymous sets and the rule) as the
// executor sends it, with fresh sequence numbers.
func ruleMessages(t *testing.T, family knftables.Family, chain string, r *compiledRule) []byte {
	t.Helper()
	ex, err := New(family, render.TableName, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := &translator{b: &builder{}, family: string(family), nfproto: ex.nfproto, table: render.TableName}
	if _, err := tr.writeRule(chain, r); err != nil {
		t.Fatalf("%s: %v", chain, err)
	}
	return tr.b.buf
}

// TestEncodeRuleMatchesText: every rule of every renderer case, encoded from its
// typed form, gives the netlink messages that compiling its printed text gives.
func TestEncodeRuleMatchesText(t *testing.T) {
	for _, tc := range renderCases() {
		cfg, chains := caseChains(&tc)
		family := string(cfg.Family)
		for _, c := range chains {
			for i := range c.Rules {
				r := &c.Rules[i]
				text := r.String()
				toks, err := appendTokens(nil, text)
				if err != nil {
					t.Fatal(err)
				}
				var textID, typedID uint32
				want, err := compileRule(family, toks, func() uint32 { textID++; return textID })
				if err != nil {
					t.Fatalf("%s: %s: compiling the text: %v", tc.name, text, err)
				}
				got, err := encodeRule(family, r, func() uint32 { typedID++; return typedID })
				if err != nil {
					t.Errorf("%s: %s: %v", tc.name, text, err)
					continue
				}
				if !bytes.Equal(ruleMessages(t, cfg.Family, c.Name, &got), ruleMessages(t, cfg.Family, c.Name, &want)) {
					t.Errorf("%s: %s: the typed encoding differs from the text's", tc.name, text)
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

// TestEncodeRuleRejects: typed rules outside what the text parser accepts fail the
// same way, never encode something else.
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

// TestLoweredTextMatchesText: the documented syntax beyond the renderer's, read by
// nfttext and lowered to typed rules, encodes as the text parser compiles it.
func TestLoweredTextMatchesText(t *testing.T) {
	for _, text := range []string{
		`ct state established,related accept`, `ct state != new drop`, `ct status != dnat accept`,
		`ip saddr 10.0.0.0/12 drop`, `ip saddr != 10.1.2.3 drop`, `ip saddr 10.0.0.1-10.0.0.5 counter drop`,
		`ip saddr != 10.0.0.1-10.0.0.5 drop`, `ip saddr { 10.0.0.1, 10.0.0.2, 10.0.0.3 } drop`,
		`ip saddr != { 10.0.0.0/8, 10.1.0.0/16, 11.0.0.0/8, 192.168.0.0/24 } drop`,
		`ip saddr { 0.0.0.0/1, 200.0.0.0/5, 255.255.255.255 } drop`, `ip saddr { 10.0.0.1-10.0.0.9, 10.1.0.0/16 } drop`,
		`iifname "veth*" accept`, `oifname "eth0" return`, `meta iifname lo accept`,
		`meta mark set meta mark | 0x4000`, `mark set 0x10`, `mark set mark and 0xffff`, `mark 0x4000 accept`,
		`mark and 0x4000 0x4000 continue`, `fib daddr type != local drop`, `th sport 53 accept`,
		`numgen random mod 4 offset 1 2 jump c2`, `meta l4proto . th dport vmap @m2`,
		`meta l4proto . th dport vmap { tcp . 80 : goto c2 , udp . 53 : drop }`, `ip daddr @iv accept`,
		`ip daddr != @s4 accept`, `add @aff { ip saddr }`, `dnat to 10.0.0.1`, `meta l4proto udp dnat ip to 10.0.0.1:53`,
		`masquerade random`, `masquerade`, `snat to 10.0.0.9`, `snat to 10.0.0.9:1000`, `accept comment "with ; { } : , inside"`,
		`counter name "k1" drop`, `th dport 22 counter name k2 drop`,
	} {
		toks, err := appendTokens(nil, text)
		if err != nil {
			t.Fatal(err)
		}
		var textID, typedID uint32
		want, err := compileRule("ip", toks, func() uint32 { textID++; return textID })
		if err != nil {
			t.Fatalf("%s: compiling the text: %v", text, err)
		}
		parsed, err := nfttext.ParseRule(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		lowered, err := nfttext.Lower(parsed, nft.IPv4)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		got, err := encodeRule("ip", lowered, func() uint32 { typedID++; return typedID })
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if !bytes.Equal(ruleMessages(t, knftables.IPv4Family, "c1", &got), ruleMessages(t, knftables.IPv4Family, "c1", &want)) {
			t.Errorf("%s: the lowered encoding differs from the text's", text)
		}
	}
}
