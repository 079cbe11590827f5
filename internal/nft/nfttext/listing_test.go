package nfttext

import (
	"reflect"
	"strings"
	"testing"
)

// kernelListing is how nft 1.0.6 lists a table kproxy wrote (shortened): base
// chains with symbolic priorities and policies, comments, elements wrapped over
// lines with comments and timeouts, typeof maps, a named counter.
const kernelListing = `table ip kube-proxy {
	comment "rules for kube-proxy"
	set affinity-X {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 3h
		elements = { 10.244.1.3 timeout 3h expires 2h59m58s, 10.244.1.4 timeout 3h expires 1h }
	}

	set cluster-ips {
		type ipv4_addr
		comment "Active ClusterIPs"
		elements = { 172.30.0.42, 172.30.0.43 }
	}

	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to services with no endpoints"
		elements = { 5.6.7.8 . tcp . 80 comment "ns3/svc3:p80" : drop }
	}

	map service-endpoints-tcp-16 {
		typeof ip daddr . tcp dport . numgen random mod 1 : ip daddr . tcp dport
		elements = { 1.2.3.4 . 80 . 0 : 10.180.0.1 . 80,
			     172.30.0.42 . 80 . 1 : 10.180.0.2 . 80 }
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 1.2.3.4 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80,
			     172.30.0.42 . tcp . 80 : goto service-42NFTM6N-ns2/svc2/tcp/p80 }
	}

	counter localhost-nodeport-rejected-tcp {
		packets 0 bytes 0
	}

	chain filter-prerouting-pre-dnat {
		type filter hook prerouting priority dstnat - 10; policy accept;
		ct state new jump firewall-check
	}

	chain reject-chain {
		comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
		reject
	}

	chain masquerading {
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
	}

	chain service-42NFTM6N-ns2/svc2/tcp/p80 {
		dnat ip to ip daddr . tcp dport . numgen random mod 2 map @service-endpoints-tcp-16
	}

	chain empty {
	}
}
table ip6 other {
}
`

func TestParseListing(t *testing.T) {
	l, err := ParseListing(kernelListing)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tables) != 2 || l.Tables[1].Family != "ip6" || l.Tables[1].Name != "other" {
		t.Fatalf("tables: %+v", l.Tables)
	}
	tbl := l.Tables[0]
	if tbl.Family != "ip" || tbl.Name != "kube-proxy" || tbl.Comment != "rules for kube-proxy" {
		t.Errorf("table %s %s comment %q", tbl.Family, tbl.Name, tbl.Comment)
	}
	if !reflect.DeepEqual(tbl.Counters, []string{"localhost-nodeport-rejected-tcp"}) {
		t.Errorf("counters %v", tbl.Counters)
	}
	sets := map[string]ListedSet{}
	for _, s := range tbl.Sets {
		sets[s.Name] = s
	}
	aff := sets["affinity-X"]
	if aff.IsMap || aff.Type != "ipv4_addr" || !reflect.DeepEqual(aff.Flags, []string{"dynamic", "timeout"}) || len(aff.Elements) != 2 ||
		aff.Elements[0].Key[0] != "10.244.1.3" || aff.Elements[0].Timeout != "3h" || aff.Elements[0].Expires != "2h59m58s" {
		t.Errorf("affinity set %+v", aff)
	}
	if got := sets["no-endpoint-services"].Elements; len(got) != 1 || !reflect.DeepEqual(got[0].Key, []string{"5.6.7.8", "tcp", "80"}) ||
		got[0].Comment != "ns3/svc3:p80" || !reflect.DeepEqual(got[0].Value, []string{"drop"}) {
		t.Errorf("no-endpoint-services elements %+v", got)
	}
	eps := sets["service-endpoints-tcp-16"]
	if !eps.IsMap || !eps.TypeOf || len(eps.Elements) != 2 || !reflect.DeepEqual(eps.Elements[1].Key, []string{"172.30.0.42", "80", "1"}) ||
		!reflect.DeepEqual(eps.Elements[1].Value, []string{"10.180.0.2", "80"}) {
		t.Errorf("service-endpoints map %+v", eps)
	}
	if got := sets["service-ips"].Elements; len(got) != 2 || !reflect.DeepEqual(got[0].Value, []string{"goto external-42NFTM6N-ns2/svc2/tcp/p80"}) {
		t.Errorf("service-ips elements %+v", got)
	}
	chains := map[string]ListedChain{}
	for _, c := range tbl.Chains {
		chains[c.Name] = c
	}
	pre := chains["filter-prerouting-pre-dnat"]
	if pre.Type != "filter" || pre.Hook != "prerouting" || pre.Priority != "dstnat - 10" || pre.Policy != "accept" || len(pre.Rules) != 1 {
		t.Errorf("base chain %+v", pre)
	}
	if rc := chains["reject-chain"]; rc.Comment == "" || len(rc.Rules) != 1 || rc.Rules[0].Text != "reject" {
		t.Errorf("reject-chain %+v", rc)
	}
	masq := chains["masquerading"].Rules[0]
	if len(masq.Rule.Stmts) != 3 {
		t.Errorf("masquerading rule %q: %d statements", masq.Text, len(masq.Rule.Stmts))
	}
	nat := chains["service-42NFTM6N-ns2/svc2/tcp/p80"].Rules[0].Rule.Stmts[0].(NAT)
	if nat.Map == nil || nat.Map.Name != "service-endpoints-tcp-16" || len(nat.Map.Key) != 3 {
		t.Errorf("dnat %+v", nat)
	}
	if c, ok := chains["empty"]; !ok || len(c.Rules) != 0 {
		t.Errorf("empty chain %+v", c)
	}
}

func TestParseListingErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"table ip t {\n\tchain c {\n\t\tfrobnicate\n\t}\n}\n", `line 3 "frobnicate"`},
		{"table ip t {\n\tchain c {\n", "chain not closed"},
		{"tabel ip t {\n}\n", "expected \"table FAMILY NAME {\""},
		{"table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 1.2.3.4 : drop }\n\t}\n}\n", "unexpected words"},
		{"table ip t {\n\tmap m {\n\t\ttype ipv4_addr : verdict\n\t\telements = { 1.2.3.4 }\n\t}\n}\n", "expected \":\" and a value"},
		{"table ip t {\n\tflowtable f {\n\t}\n}\n", "unsupported table statement"},
	} {
		_, err := ParseListing(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseListing(%q): %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}
