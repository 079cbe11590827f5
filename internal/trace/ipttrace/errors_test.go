package ipttrace

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/trace"
)

// TestNewRefusesWhatItDoesNotUnderstand: New parses every rule, and names the rule
// it cannot understand, even where no packet would go.
func TestNewRefusesWhatItDoesNotUnderstand(t *testing.T) {
	for _, tc := range []struct {
		name, rules, want string
	}{
		{"unknown match module", `filter -A FORWARD -m socket --transparent -j DROP`, `match module "socket" is not supported`},
		{"physdev other than is-in", `filter -A FORWARD -m physdev --physdev-in eth0 -j DROP`, `only --physdev-is-in, alone, is modelled`},
		{"set with counters", `filter -A FORWARD -m set --match-set S dst --packets-gt 1 -j DROP`, `unknown option --packets-gt`},
		{"set bad flag", `filter -A FORWARD -m set --match-set S dst,foo -j DROP`, `bad flag "foo"`},
		{"ipvs unknown protocol", `filter -A OUTPUT -m ipvs --vproto foo -j DROP`, `unknown protocol "foo"`},
		{"socket", `mangle -A PREROUTING -m socket -j ACCEPT`, `match module "socket" is not supported`},
		{"unknown target", `filter -A FORWARD -j CONNMARK --restore-mark`, `target CONNMARK is not supported`},
		{"unknown option", `filter -A FORWARD -p tcp -m tcp --syn -j DROP`, `-m tcp: unknown option --syn`},
		{"option outside a module", `filter -A FORWARD --comment x -j DROP`, `option --comment outside a match module`},
		{"unknown target option", `filter -A FORWARD -j REJECT --foo`, `-j REJECT: unknown option --foo`},
		{"tcp match without -p tcp", `filter -A FORWARD -m tcp --dport 80 -j DROP`, `-m tcp: needs -p tcp`},
		{"multiport without -p", `filter -A FORWARD -m multiport --dports 80 -j DROP`, `-m multiport: needs -p`},
		{"IPv6 address in IPv4 rules", `filter -A FORWARD -d fd00::1/128 -j DROP`, `address fd00::1/128 is not IPv4`},
		{"bad address", `filter -A FORWARD -s 10.0.0.0/255.0.255.0 -j DROP`, `only CIDR prefixes are supported`},
		{"DNAT outside nat", `filter -A FORWARD -j DNAT --to-destination 10.1.0.1`, `-j DNAT: only valid in table nat`},
		{"DNAT range", `nat -A PREROUTING -j DNAT --to-destination 10.1.0.1-10.1.0.9`, `ranges are not supported`},
		{"DNAT without address", `nat -A PREROUTING -j DNAT`, `needs --to-destination`},
		{"NOTRACK outside raw", `filter -A FORWARD -j NOTRACK`, `only valid in table raw`},
		{"addrtype limit-iface-in", `filter -A INPUT -m addrtype --dst-type LOCAL --limit-iface-in -j DROP`, `--limit-iface-in is not supported`},
		{"addrtype unknown type", `filter -A INPUT -m addrtype --dst-type ANYCAST -j DROP`, `address type "ANYCAST" is not supported`},
		{"statistic nth", `nat -A PREROUTING -m statistic --mode nth --every 2 --packet 0 -j DNAT --to-destination 10.1.0.1`, `not supported`},
		{"bad probability", `nat -A PREROUTING -m statistic --mode random --probability 2 -j ACCEPT`, `bad --probability`},
		{"recent hitcount", `nat -A PREROUTING -m recent --rcheck --hitcount 2 --name X -j ACCEPT`, `--hitcount is not supported`},
		{"recent without command", `nat -A PREROUTING -m recent --name X -j ACCEPT`, `needs one of --set`},
		{"bad mark", `filter -A FORWARD -m mark --mark 0x4000/0xzz -j DROP`, `bad mark mask`},
		{"MARK two ops", `mangle -A FORWARD -j MARK --set-xmark 0x1/0x1 --or-mark 0x2`, `needs exactly one of`},
		{"unknown ctstate", `filter -A FORWARD -m conntrack --ctstate FOO -j DROP`, `unknown state "FOO"`},
		{"jump to a built-in chain", `filter -A FORWARD -j INPUT`, `jump to built-in chain INPUT`},
		{"fragment", `filter -A FORWARD -f -j DROP`, `unexpected argument "-f"`},
		{"dangling value", `filter -A FORWARD -s`, `-s needs a value`},
		{"goto a target", `filter -A FORWARD -g DROP`, `-g needs a chain`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			save := buildSave(tc.rules)
			_, err := New([]byte(save), false, nil)
			if err == nil {
				t.Fatalf("New accepted %q", tc.rules)
			}
			_, rule, _ := strings.Cut(tc.rules, " ")
			for _, want := range []string{tc.want, "rule `" + rule + "`", ", line "} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestNewRefusesBadSaves(t *testing.T) {
	for _, tc := range []struct{ name, save, want string }{
		{"no COMMIT", "*filter\n:INPUT ACCEPT [0:0]\n", "no COMMIT"},
		{"undeclared chain", "*filter\n:INPUT ACCEPT [0:0]\n-A FOO -j DROP\nCOMMIT\n", "line 3: rule of undeclared chain FOO"},
		{"unknown table", "*broute\n:BROUTING ACCEPT [0:0]\nCOMMIT\n", `table "broute" is not supported`},
		{"policy on a user chain", "*filter\n:FOO ACCEPT [0:0]\nCOMMIT\n", "chain FOO is not a built-in chain"},
		{"bad policy", "*filter\n:INPUT - [0:0]\nCOMMIT\n", `built-in chain INPUT has policy "-"`},
		{"unknown target", "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -j SECMARK\nCOMMIT\n", "line 3: rule `-A FORWARD -j SECMARK`: no chain SECMARK in table filter (unknown target?)"},
		{"junk", "*filter\n:INPUT ACCEPT [0:0]\nfoo\nCOMMIT\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New([]byte(tc.save), false, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := New([]byte(buildSave("")), false, []netip.Addr{{}}); err == nil {
		t.Error("New accepted an invalid local address")
	}
}

// TestTraceRefusesTargetsAtTheWrongHook: the kernel refuses to load a table where a
// target is reachable from a hook it does not support; the tracer names the rule.
func TestTraceRefusesTargetsAtTheWrongHook(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		pkt         trace.Packet
		want        string
	}{
		{"REJECT in PREROUTING", "mangle -A PREROUTING -j C\nmangle -A C -j REJECT", defaultPacket4,
			"table mangle, line 14: rule `-A C -j REJECT`: REJECT reached from mangle PREROUTING (allowed from: INPUT, FORWARD, OUTPUT)"},
		{"DNAT in POSTROUTING", "nat -A POSTROUTING -j C\nnat -A C -j DNAT --to-destination 10.1.0.1", defaultPacket4,
			"DNAT reached from nat POSTROUTING"},
		{"MASQUERADE in OUTPUT", "nat -A OUTPUT -j C\nnat -A C -j MASQUERADE",
			trace.Packet{SourceIP: "10.0.0.1", DestIP: "172.30.0.1", LocallyGenerated: true}, "MASQUERADE reached from nat OUTPUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New([]byte(buildSave(tc.rules)), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tr.Trace(tc.pkt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Trace error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTraceRefusesBadPackets(t *testing.T) {
	tr, err := New([]byte(buildSave("")), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []trace.Packet{
		{SourceIP: "fd00::1", DestIP: "fd00::2"},
		{SourceIP: "10.0.0.1", DestIP: "fd00::2"},
		{SourceIP: "10.0.0.1", DestIP: "x"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", Protocol: "ospfigp"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", CTState: "bogus"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", DestPort: 70000},
	} {
		if _, err := tr.Trace(p); err == nil {
			t.Errorf("Trace(%+v) accepted", p)
		}
	}
}
