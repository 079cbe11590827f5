package nftnetlink

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

const vocabBase = `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy c1
add chain ip kube-proxy c2 { comment "helper" ; }
add chain ip kube-proxy nat-pre { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nat-post { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy filter-in { type filter hook input priority 0 ; policy accept ; }
add set ip kube-proxy s4 { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip kube-proxy aff { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add set ip kube-proxy iv { type ipv4_addr ; flags interval ; }
add set ip kube-proxy spare { type ipv4_addr ; }
add set ip kube-proxy sized { type inet_service ; size 100 ; policy memory ; }
add map ip kube-proxy m2 { type inet_proto . inet_service : verdict ; }
add map ip kube-proxy data { type ipv4_addr : ipv4_addr . inet_service ; }
`

// TestEquivalentToNftVocabulary covers the documented syntax beyond what the
// renderer's golden files use.
func TestEquivalentToNftVocabulary(t *testing.T) {
	needRoot(t)
	rules := []string{
		`ct state established,related accept`,
		`ct state != new drop`,
		`ct status != dnat accept`,
		`ip saddr 10.0.0.0/12 drop`,
		`ip saddr != 10.1.2.3 drop`,
		`ip saddr 10.0.0.1-10.0.0.5 counter drop`,
		`ip saddr != 10.0.0.1-10.0.0.5 drop`,
		`ip saddr { 10.0.0.1, 10.0.0.2, 10.0.0.3 } drop`,
		`ip saddr != { 10.0.0.0/8, 10.1.0.0/16, 11.0.0.0/8, 192.168.0.0/24 } drop`,
		`ip saddr { 0.0.0.0/1, 200.0.0.0/5, 255.255.255.255 } drop`,
		`iifname "veth*" accept`,
		`oifname "eth0" return`,
		`meta iifname lo accept`,
		`meta mark set meta mark | 0x4000`,
		`mark set 0x10`,
		`mark set mark and 0xffff`,
		`mark 0x4000 accept`,
		`mark and 0x4000 0x4000 continue`,
		`fib daddr type != local drop`,
		`th sport 53 accept`,
		`numgen random mod 4 offset 1 2 jump c2`,
		`meta l4proto . th dport vmap @m2`,
		`meta l4proto . th dport vmap { tcp . 80 : goto c2 , udp . 53 : drop }`,
		`ip daddr @iv accept`,
		`ip daddr != @s4 accept`,
		`add @aff { ip saddr }`,
		`dnat to 10.0.0.1`,
		`meta l4proto udp dnat ip to 10.0.0.1:53`,
		`masquerade random`,
		`masquerade`,
		`snat to 10.0.0.9`,
		`accept comment "with ; { } : , inside"`,
		`counter name "k1" drop`,
		`th dport 22 counter name k2 drop`,
	}
	var b strings.Builder
	b.WriteString(vocabBase)
	b.WriteString("add counter ip kube-proxy k1\nadd counter ip kube-proxy k2 { packets 5 bytes 300 ; }\nadd counter ip kube-proxy k3\n")
	for _, r := range rules {
		chain := "c1"
		switch {
		case strings.Contains(r, "dnat"):
			chain = "nat-pre"
		case strings.Contains(r, "snat") || strings.Contains(r, "masquerade"):
			chain = "nat-post"
		}
		b.WriteString("add rule ip kube-proxy " + chain + " " + r + "\n")
	}
	b.WriteString(`add element ip kube-proxy sized { 80 }
add element ip kube-proxy m2 { tcp . 80 comment "web" : jump c2 }
add element ip kube-proxy m2 { udp . 53 : accept }
add element ip kube-proxy data { 10.0.0.1 : 10.0.0.2 . 8080 }
`)
	delta := `delete element ip kube-proxy m2 { udp . 53 }
flush set ip kube-proxy sized
flush map ip kube-proxy data
delete set ip kube-proxy spare
flush chain ip kube-proxy c2
delete chain ip kube-proxy filter-in
add element ip kube-proxy sized { 443 }
delete counter ip kube-proxy k3
add counter ip kube-proxy k1
`
	compareScripts(t, knftables.IPv4Family, "kube-proxy", b.String(), delta+"delete map ip kube-proxy data\n", "flush table ip kube-proxy\n")
}

// TestFailedTransactionChangesNothing: a batch the kernel refuses leaves the table
// as it was, and the error names the refused command.
func TestFailedTransactionChangesNothing(t *testing.T) {
	ns, ex := testExecutor(t)
	ctx := context.Background()
	if err := ex.apply(ctx, oneText(vocabBase), true); err != nil {
		t.Fatal(err)
	}
	before := listTable(t, ns, knftables.IPv4Family, "kube-proxy")
	bad := "add element ip kube-proxy s4 { 10.0.0.7 }\nflush chain ip kube-proxy c1\nadd rule ip kube-proxy c1 jump no-such-chain\nadd chain ip kube-proxy c3\n"
	err := ex.apply(ctx, oneText(bad), true)
	if err == nil || !strings.Contains(err.Error(), "jump no-such-chain") {
		t.Fatalf("got %v, want an error naming the jump", err)
	}
	if after := listTable(t, ns, knftables.IPv4Family, "kube-proxy"); after != before {
		t.Fatalf("a failed transaction changed the table:\n%s", after)
	}
}

// TestCheck validates without applying.
func TestCheck(t *testing.T) {
	ns, ex := testExecutor(t)
	ctx := context.Background()
	tx := ex.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "c"})
	tx.Add(&knftables.Rule{Chain: "c", Rule: "ct state new drop"})
	if err := ex.Check(ctx, tx); err != nil {
		t.Fatalf("check of a valid transaction: %v", err)
	}
	if out, err := nftIn(ns, "", "list", "tables"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("check applied something: %v %q", err, out)
	}
	bad := ex.NewTransaction()
	bad.Add(&knftables.Table{})
	bad.Add(&knftables.Chain{Name: "c"})
	bad.Add(&knftables.Rule{Chain: "c", Rule: "goto missing"})
	if err := ex.Check(ctx, bad); err == nil {
		t.Fatal("check of an invalid transaction succeeded")
	}
	if err := ex.Run(ctx, tx); err != nil {
		t.Fatalf("run: %v", err)
	}
}
