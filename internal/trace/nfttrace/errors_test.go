package nfttrace

import (
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/trace"
)

// TestUnsupportedSyntaxFailsLoudly checks that anything the tracer does not understand
// is an error naming the rule, both when a packet reaches it and from Validate.
func TestUnsupportedSyntaxFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		err   string
	}{
		{"unknown statement", `add rule FAM t forward limit rate 10/second drop`, `unsupported statement at "limit"`},
		{"unknown ip field", `add rule FAM t forward ip ttl 5 drop`, `unsupported ip field at "ttl"`},
		{"unknown meta key", `add rule FAM t forward meta skuid 0 drop`, `unsupported meta key`},
		{"bad address", `add rule FAM t forward ip daddr 10.0.0.300 drop`, `bad ipv4_addr "10.0.0.300"`},
		{"ipv6 address in ip match", `add rule FAM t forward ip daddr fd00::1 drop`, `bad ipv4_addr "fd00::1"`},
		{"unknown ct state", `add rule FAM t forward ct state bogus drop`, `unknown ct state "bogus"`},
		{"statement after verdict", `add rule FAM t forward drop counter`, `statement after terminal statement`},
		{"dnat in filter chain", `add rule FAM t forward dnat to 10.0.0.1:80`, `dnat reached from a filter chain`},
		{"masquerade in prerouting", `add rule FAM t prerouting masquerade`, `masquerade reached from hook prerouting`},
		{"bad set element", `
add set FAM t s { type ipv4_addr . inet_service ; }
add element FAM t s { 10.0.0.1 . http }
add rule FAM t forward ip saddr . tcp dport @s drop`, `set @s element "10.0.0.1 . http": bad inet_service "http"`},
		{"set key arity", `
add set FAM t s { type ipv4_addr ; }
add element FAM t s { 10.0.0.1 }
add rule FAM t forward ip saddr . tcp dport @s drop`, `key has 1 components, lookup has 2`},
		{"bad nat target", `add rule FAM t prerouting dnat to 10.0.0.1:http`, `bad nat target port "http"`},
		{"nat family mismatch", `add rule FAM t prerouting dnat ip6 to 10.0.0.1:80`, `does not match family`},
		{"unterminated string", `add rule FAM t forward iifname "eth0 drop`, `unterminated string`},
		{"bad numgen", `add rule FAM t prerouting numgen inc mod 2 vmap { 0 : drop }`, `only "numgen random" is supported`},
		{"bad vmap verdict", `add rule FAM t forward tcp dport vmap { 80 : queue }`, `bad verdict "queue"`},
		{"missing operand", `add rule FAM t forward ip saddr`, `expected ipv4_addr value at end of rule`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nft := newFake(t, knftables.IPv4Family, baseChains+tc.rules)
			_, err := Trace(nft, nil, defaultPacket4)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Trace: got error %v, want one containing %q", err, tc.err)
			}
			// The error names the rule.
			lines := strings.Split(strings.TrimSpace(tc.rules), "\n")
			ruleText := strings.SplitN(lines[len(lines)-1], " ", 6)[5]
			if err != nil && !strings.Contains(err.Error(), ruleText) {
				t.Errorf("error %q does not name rule %q", err, ruleText)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		err   string
	}{
		{"unreached bad rule", `
add chain FAM t unused
add rule FAM t unused ip ttl 1 drop`, "chain ip t unused: rule `ip ttl 1 drop`"},
		{"bad element in unreached map", `
add chain FAM t unused
add map FAM t m { type ipv4_addr : verdict ; }
add element FAM t m { 10.0.0.1 : queue }
add rule FAM t unused ip daddr vmap @m`, `map @m element`},
		{"valid", `
add chain FAM t used
add rule FAM t used tcp dport 80 counter drop
add rule FAM t forward jump used`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nft := newFake(t, knftables.IPv4Family, baseChains+tc.rules)
			tr, err := New(nft, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = tr.Validate()
			if tc.err == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Validate: got %v, want error containing %q", err, tc.err)
			}
		})
	}
}

func TestBadPackets(t *testing.T) {
	nft := newFake(t, knftables.IPv4Family, baseChains)
	for _, p := range []trace.Packet{
		{SourceIP: "10.0.0.1", DestIP: "nope"},
		{SourceIP: "10.0.0.1", DestIP: "fd00::1"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", Protocol: "tcpp"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", CTState: "weird"},
		{SourceIP: "10.0.0.1", DestIP: "10.0.0.2", DestPort: 70000},
	} {
		if _, err := Trace(nft, nil, p); err == nil {
			t.Errorf("Trace(%+v): expected an error", p)
		}
	}
	if _, err := New(nft, []string{"not-an-ip"}); err == nil {
		t.Errorf("New with a bad local address: expected an error")
	}
}
