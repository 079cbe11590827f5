package ipttrace

import (
	"slices"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/trace"
)

var defaultPacket4 = trace.Packet{SourceIP: "10.0.0.1", DestIP: "172.30.0.1", DestPort: 80, InputInterface: "eth0"}

func TestTraceIPv4Matches(t *testing.T) {
	runTraceCases(t, false, []string{"192.168.0.1"}, defaultPacket4, []traceCase{
		{name: "empty tables accept", traced: "filter FORWARD (hook forward, priority 0, policy ACCEPT)"},
		{name: "-d", rules: `filter -A FORWARD -d 172.30.0.1/32 -j DROP`, want: trace.Drop,
			traced: "  [FORWARD] -d 172.30.0.1/32 -j DROP"},
		{name: "--dst (kubelet's spelling)", rules: `filter -A FORWARD --dst 172.30.0.1/32 ! --src 127.0.0.0/8 -j DROP`, want: trace.Drop},
		{name: "-d without prefix", rules: `filter -A FORWARD -d 172.30.0.1 -j DROP`, want: trace.Drop},
		{name: "-d other", rules: `filter -A FORWARD -d 172.30.0.2/32 -j DROP`},
		{name: "! -d prefix", rules: `filter -A FORWARD ! -d 172.30.0.0/16 -j DROP`},
		{name: "! -d prefix matches", rules: `filter -A FORWARD ! -d 10.0.0.0/8 -j DROP`, want: trace.Drop},
		{name: "-s prefix", rules: `filter -A FORWARD -s 10.0.0.0/8 -j REJECT --reject-with icmp-port-unreachable`, want: trace.Reject},
		{name: "! -s", rules: `filter -A FORWARD ! -s 10.0.0.0/8 -j DROP`},
		{name: "-p other protocol", rules: `filter -A FORWARD -p udp -j DROP`},
		{name: "! -p other protocol", rules: `filter -A FORWARD ! -p udp -j DROP`, want: trace.Drop},
		{name: "-p by number", rules: `filter -A FORWARD -p 6 -m tcp --dport 80 -j DROP`, want: trace.Drop},
		{name: "-p all", rules: `filter -A FORWARD -p all -j DROP`, want: trace.Drop},
		{name: "-m tcp --dport", rules: `filter -A FORWARD -p tcp -m tcp --dport 80 -j DROP`, want: trace.Drop},
		{name: "-m tcp --dport other", rules: `filter -A FORWARD -p tcp -m tcp --dport 81 -j DROP`},
		{name: "-m tcp ! --dport", rules: `filter -A FORWARD -p tcp -m tcp ! --dport 81 -j DROP`, want: trace.Drop},
		{name: "--dport range", rules: `filter -A FORWARD -p tcp -m tcp --dport 70:90 -j DROP`, want: trace.Drop},
		{name: "--sport", rules: `filter -A FORWARD -p tcp -m tcp --sport 40000 -j DROP`, pkt: trace.Packet{SourcePort: 40000}, want: trace.Drop},
		{name: "implicit tcp match", rules: `filter -A FORWARD -p tcp --dport 80 -j DROP`, want: trace.Drop},
		{name: "long option name", rules: `filter -A FORWARD -p tcp -m tcp --destination-port 80 -j DROP`, want: trace.Drop},
		{name: "-m udp on tcp", rules: `filter -A FORWARD -p udp -m udp --dport 80 -j DROP`},
		{name: "-m udp", rules: `filter -A FORWARD -p udp -m udp --dport 80 -j DROP`, pkt: trace.Packet{Protocol: "udp"}, want: trace.Drop},
		{name: "-m sctp", rules: `filter -A FORWARD -p sctp -m sctp --dport 80 -j DROP`, pkt: trace.Packet{Protocol: "sctp"}, want: trace.Drop},
		{name: "multiport", rules: `filter -A FORWARD -p tcp -m multiport --dports 53,79:81 -j DROP`, want: trace.Drop},
		{name: "multiport miss", rules: `filter -A FORWARD -p tcp -m multiport --dports 53,81:90 -j DROP`},
		{name: "multiport ! --sports", rules: `filter -A FORWARD -p tcp -m multiport ! --sports 1,2 -j DROP`, want: trace.Drop},
		{name: "-i", rules: `filter -A FORWARD -i eth0 -j DROP`, want: trace.Drop},
		{name: "-i wildcard", rules: `filter -A FORWARD -i eth+ -j DROP`, want: trace.Drop},
		{name: "! -i wildcard", rules: `filter -A FORWARD ! -i veth+ -j DROP`, want: trace.Drop},
		{name: "-i other", rules: `filter -A FORWARD -i veth0 -j DROP`},
		{name: "-o", rules: `filter -A FORWARD -o eth1 -j DROP`, pkt: trace.Packet{OutputInterface: "eth1"}, want: trace.Drop},
		{name: "-o unknown before routing", rules: `nat -A PREROUTING -o eth1 -j DNAT --to-destination 10.1.0.1`,
			pkt: trace.Packet{OutputInterface: "eth1"}},
		{name: "comment kept in the trace", rules: `filter -A FORWARD -m comment --comment "a \"quoted\" comment" -j DROP`, want: trace.Drop,
			traced: `[FORWARD] -m comment --comment "a \"quoted\" comment" -j DROP`},
		{name: "nfacct counts", rules: `filter -A FORWARD -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP`, want: trace.Drop},
		{name: "addrtype dst LOCAL", rules: `filter -A INPUT -m addrtype --dst-type LOCAL -j DROP`,
			pkt: trace.Packet{DestIP: "192.168.0.1"}, want: trace.Drop},
		{name: "addrtype dst LOCAL is not a ClusterIP", rules: `filter -A FORWARD -m addrtype --dst-type LOCAL -j DROP`},
		{name: "addrtype src ! LOCAL", rules: `filter -A FORWARD -m addrtype ! --src-type LOCAL -j DROP`, want: trace.Drop},
		{name: "addrtype loopback is LOCAL", rules: `filter -A INPUT -m addrtype --dst-type LOCAL -j DROP`,
			pkt: trace.Packet{DestIP: "127.0.0.1"}, want: trace.Drop},
		{name: "addrtype list", rules: `filter -A FORWARD -m addrtype --dst-type MULTICAST,UNICAST -j DROP`, want: trace.Drop},
		{name: "ctstate NEW", rules: `filter -A FORWARD -m conntrack --ctstate NEW -j DROP`, want: trace.Drop},
		{name: "ctstate list", rules: `filter -A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j DROP`,
			pkt: trace.Packet{CTState: "established"}, want: trace.Drop},
		{name: "! ctstate", rules: `filter -A FORWARD -m conntrack ! --ctstate RELATED,ESTABLISHED -j DROP`, want: trace.Drop},
		{name: "ctstate INVALID", rules: `filter -A FORWARD -m conntrack --ctstate INVALID -j DROP`,
			pkt: trace.Packet{CTState: "invalid"}, want: trace.Drop},
		{name: "ctstate DNAT after DNAT", rules: "nat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080\nfilter -A FORWARD -m conntrack --ctstate DNAT -j DROP",
			want: trace.Drop, dnat: []string{"10.1.0.1:8080"}},
		{name: "ctstate DNAT without DNAT", rules: `filter -A FORWARD -m conntrack --ctstate DNAT -j DROP`},
		{name: "ctstatus of a new connection", rules: `filter -A FORWARD -m conntrack --ctstatus SEEN_REPLY,CONFIRMED -j DROP`},
		{name: "ctstatus of an established one", rules: `filter -A FORWARD -m conntrack --ctstatus ASSURED -j DROP`,
			pkt: trace.Packet{CTState: "established"}, want: trace.Drop},
		{name: "state", rules: `filter -A FORWARD -m state --state ESTABLISHED -j DROP`,
			pkt: trace.Packet{CTState: "established"}, want: trace.Drop},
		{name: "mark", rules: `filter -A FORWARD -m mark --mark 0x4000/0x4000 -j DROP`, pkt: trace.Packet{Mark: 0x4001}, want: trace.Drop},
		{name: "mark without mask", rules: `filter -A FORWARD -m mark --mark 0x4000 -j DROP`, pkt: trace.Packet{Mark: 0x4001}},
		{name: "! mark", rules: `filter -A FORWARD -m mark ! --mark 0x4000/0x4000 -j DROP`, want: trace.Drop},
		{name: "two modules", rules: `filter -A FORWARD -p tcp -m comment --comment x -m tcp --dport 80 -m conntrack --ctstate NEW -j DROP`, want: trace.Drop},
		{name: "counters prefix", rules: `filter [5:300] -A FORWARD -j DROP`, want: trace.Drop},
	})
}

func TestTraceIPv4Targets(t *testing.T) {
	runTraceCases(t, false, []string{"192.168.0.1"}, defaultPacket4, []traceCase{
		{name: "policy DROP", rules: `filter :FORWARD DROP`, want: trace.Drop, traced: "  policy DROP"},
		{name: "ACCEPT beats policy", rules: "filter :FORWARD DROP\nfilter -A FORWARD -j ACCEPT"},
		{name: "ACCEPT ends the table's chain only", rules: "mangle -A FORWARD -j ACCEPT\nfilter -A FORWARD -j DROP", want: trace.Drop},
		{name: "ACCEPT ends the chain", rules: "filter -A FORWARD -j ACCEPT\nfilter -A FORWARD -j DROP"},
		{name: "RETURN in a built-in chain is the policy", rules: "filter :FORWARD DROP\nfilter -A FORWARD -j RETURN\nfilter -A FORWARD -j ACCEPT", want: trace.Drop},
		{name: "jump and RETURN", rules: "filter -A FORWARD -j A\nfilter -A A -j RETURN\nfilter -A A -j ACCEPT\nfilter -A FORWARD -j DROP", want: trace.Drop},
		{name: "jump falls through", rules: "filter -A FORWARD -j A\nfilter -A A -s 1.1.1.1/32 -j ACCEPT\nfilter -A FORWARD -j REJECT", want: trace.Reject},
		{name: "verdict in a jumped chain", rules: "filter -A FORWARD -j A\nfilter -A A -j DROP\nfilter -A FORWARD -j ACCEPT", want: trace.Drop},
		{name: "goto does not come back", rules: "filter -A FORWARD -j A\nfilter -A FORWARD -j REJECT\nfilter -A A -g B\nfilter -A A -j DROP",
			want: trace.Reject},
		{name: "rule without target", rules: "filter -A FORWARD -s 10.0.0.1/32\nfilter -A FORWARD -j DROP", want: trace.Drop,
			traced: "[FORWARD] -s 10.0.0.1/32"},
		{name: "LOG and NFLOG go on", rules: "filter -A FORWARD -j LOG --log-prefix \"x: \"\nfilter -A FORWARD -j NFLOG --nflog-group 2\nfilter -A FORWARD -j DROP",
			want: trace.Drop},
		{name: "MARK --set-xmark", rules: "mangle -A PREROUTING -j MARK --set-xmark 0x4000/0x4000", pkt: trace.Packet{Mark: 0x1}, mark: ptrTo[uint32](0x4001)},
		{name: "MARK --set-xmark clears", rules: "mangle -A PREROUTING -j MARK --set-xmark 0x4000/0x0", pkt: trace.Packet{Mark: 0x4001}, mark: ptrTo[uint32](0x1)},
		{name: "MARK --set-mark", rules: "mangle -A PREROUTING -j MARK --set-mark 0x20/0x30", pkt: trace.Packet{Mark: 0x11}, mark: ptrTo[uint32](0x21)},
		{name: "MARK --set-mark no mask", rules: "mangle -A PREROUTING -j MARK --set-mark 0x20", pkt: trace.Packet{Mark: 0x11}, mark: ptrTo[uint32](0x20)},
		{name: "MARK --or-mark", rules: "mangle -A PREROUTING -j MARK --or-mark 0x4000", pkt: trace.Packet{Mark: 0x1}, mark: ptrTo[uint32](0x4001)},
		{name: "MARK --and-mark", rules: "mangle -A PREROUTING -j MARK --and-mark 0xff", pkt: trace.Packet{Mark: 0x4001}, mark: ptrTo[uint32](0x1)},
		{name: "MARK --xor-mark", rules: "mangle -A PREROUTING -j MARK --xor-mark 0x3", pkt: trace.Packet{Mark: 0x1}, mark: ptrTo[uint32](0x2)},
		{name: "mark set then matched", rules: "nat -A PREROUTING -j MARK --set-xmark 0x4000/0x4000\nfilter -A FORWARD -m mark --mark 0x4000/0x4000 -j DROP",
			want: trace.Drop},
		{name: "DNAT", rules: `nat -A PREROUTING -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.1.0.1:8080`, dnat: []string{"10.1.0.1:8080"}},
		{name: "DNAT without port", rules: "nat -A PREROUTING -j DNAT --to-destination 10.1.0.1\nfilter -A FORWARD -p tcp -m tcp --dport 80 -j DROP",
			dnat: []string{"10.1.0.1"}, want: trace.Drop},
		{name: "DNAT is terminal", rules: "nat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080\nnat -A PREROUTING -j DNAT --to-destination 10.2.0.1:8080",
			dnat: []string{"10.1.0.1:8080"}},
		{name: "DNAT port seen by filter", rules: "nat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080\nfilter -A FORWARD -d 10.1.0.1/32 -p tcp -m tcp --dport 8080 -j DROP",
			dnat: []string{"10.1.0.1:8080"}, want: trace.Drop},
		{name: "DNAT to a local address goes to INPUT", rules: "nat -A PREROUTING -j DNAT --to-destination 192.168.0.1:8080\nfilter -A INPUT -j DROP\nfilter -A FORWARD -j ACCEPT",
			dnat: []string{"192.168.0.1:8080"}, want: trace.Drop},
		{name: "local destination skips FORWARD", rules: "filter -A FORWARD -j DROP", pkt: trace.Packet{DestIP: "192.168.0.1"}},
		{name: "nat only for new connections", rules: "nat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080", pkt: trace.Packet{CTState: "established"}},
		{name: "MASQUERADE", rules: "nat -A POSTROUTING -j MASQUERADE --random-fully", masq: true},
		{name: "MASQUERADE is terminal", rules: "nat -A POSTROUTING -j MASQUERADE\nnat -A POSTROUTING -j SNAT --to-source 1.1.1.1", masq: true},
		{name: "SNAT", rules: "nat -A POSTROUTING -j SNAT --to-source 192.168.0.1", snat: "192.168.0.1"},
		{name: "SNAT with port", rules: "nat -A POSTROUTING -j SNAT --to-source 192.168.0.1:5000 --random", snat: "192.168.0.1:5000"},
		{name: "nat INPUT", rules: "nat -A INPUT -j SNAT --to-source 192.168.0.1", pkt: trace.Packet{DestIP: "192.168.0.1"}, snat: "192.168.0.1"},
		{name: "NOTRACK skips nat", rules: "raw -A PREROUTING -j NOTRACK\nnat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080\nfilter -A FORWARD -m conntrack --ctstate UNTRACKED -j DROP",
			want: trace.Drop, traced: "untracked"},
		{name: "CT --notrack skips nat", rules: "raw -A PREROUTING -j CT --notrack\nnat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080"},
		{name: "CT --zone changes nothing", rules: "raw -A PREROUTING -j CT --zone 1\nnat -A PREROUTING -j DNAT --to-destination 10.1.0.1:8080",
			dnat: []string{"10.1.0.1:8080"}},
		{name: "TRACE changes nothing", rules: "raw -A PREROUTING -j TRACE\nfilter -A FORWARD -j DROP", want: trace.Drop},
		{name: "tables in hook order", rules: "filter -A FORWARD -m mark --mark 0x1/0x1 -j DROP\nmangle -A FORWARD -j MARK --set-xmark 0x1/0x1",
			want: trace.Drop},
		{name: "raw before nat", rules: "raw -A PREROUTING -d 172.30.0.1/32 -j MARK --set-xmark 0x2/0x2\nnat -A PREROUTING -m mark --mark 0x2/0x2 -j DNAT --to-destination 10.1.0.1:80",
			dnat: []string{"10.1.0.1:80"}},
	})
}

// TestDualStackLocalAddresses: one list of the node's addresses serves both
// families' tracers.
func TestDualStackLocalAddresses(t *testing.T) {
	tr, err := New([]byte(buildSave("filter -A INPUT -m addrtype --dst-type LOCAL -j DROP")), false, addrs("fd00::2", "192.168.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Trace(trace.Packet{SourceIP: "10.0.0.1", DestIP: "192.168.0.1", DestPort: 22, InputInterface: "eth0"})
	if err != nil || res.Verdict != trace.Drop {
		t.Errorf("got %v, %v; want DROP", res, err)
	}
}

func TestTraceIPv4Paths(t *testing.T) {
	local := "nat -A OUTPUT -d 172.30.0.1/32 -j DNAT --to-destination 192.168.0.1:8080\n"
	runTraceCases(t, false, []string{"192.168.0.1"}, defaultPacket4, []traceCase{
		{name: "locally generated: OUTPUT then POSTROUTING", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: "nat -A OUTPUT -j DNAT --to-destination 10.1.0.1:80\nnat -A POSTROUTING -d 10.1.0.1/32 -j MASQUERADE\nfilter -A INPUT -j DROP",
			dnat:  []string{"10.1.0.1:80"}, masq: true},
		{name: "locally generated: -i is empty", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: "filter -A OUTPUT ! -i eth0 -j DROP", want: trace.Drop},
		{name: "locally generated to a local address re-enters over lo", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: local + "filter -A INPUT -i lo -p tcp -m tcp --dport 8080 -j REJECT", dnat: []string{"192.168.0.1:8080"}, want: trace.Reject},
		{name: "locally generated to a local address: -o lo in OUTPUT", pkt: trace.Packet{SourceIP: "192.168.0.1", DestIP: "192.168.0.1", LocallyGenerated: true},
			rules: "filter -A OUTPUT -o lo -j DROP", want: trace.Drop},
		{name: "DNAT in OUTPUT re-routes", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: local + "nat -A POSTROUTING -o lo -j MASQUERADE", dnat: []string{"192.168.0.1:8080"}, masq: true},
		{name: "nat not re-run over lo", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: local + "nat -A PREROUTING -j DNAT --to-destination 10.9.9.9:1\nnat -A INPUT -j SNAT --to-source 1.1.1.1", dnat: []string{"192.168.0.1:8080"}},
		{name: "ctstatus CONFIRMED over lo", pkt: trace.Packet{SourceIP: "192.168.0.1", DestIP: "192.168.0.1", LocallyGenerated: true},
			rules: "filter -A INPUT -m conntrack --ctstatus CONFIRMED -j DROP", want: trace.Drop},
		{name: "REJECT in OUTPUT", pkt: trace.Packet{SourceIP: "192.168.0.1", LocallyGenerated: true},
			rules: "filter -A OUTPUT -d 172.30.0.1/32 -j REJECT", want: trace.Reject},
	})
}

func TestTraceStatistic(t *testing.T) {
	three := `nat -A PREROUTING -j SVC
nat -A SVC -m statistic --mode random --probability 0.33333333349 -j SEP1
nat -A SVC -m statistic --mode random --probability 0.50000000000 -j SEP2
nat -A SVC -j SEP3
nat -A SEP1 -p tcp -m tcp -j DNAT --to-destination 10.1.0.1:80
nat -A SEP2 -p tcp -m tcp -j DNAT --to-destination 10.1.0.2:80
nat -A SEP3 -p tcp -m tcp -j DNAT --to-destination 10.1.0.3:80`
	tr, err := New([]byte(buildSave(three)), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Trace(defaultPacket4)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Output(), "10.1.0.1:80, 10.1.0.2:80, 10.1.0.3:80"; got != want {
		t.Fatalf("got %q, want %q\n%s", got, want, res.TraceString())
	}
	checkProbabilities(t, res)
	for i, o := range res.Outcomes {
		if o.Probability < 0.333333 || o.Probability > 0.333334 {
			t.Errorf("outcome %d (%s): probability %g, want 1/3", i, o.DNAT, o.Probability)
		}
	}
	if want := "  [SVC] not taken, random choice: not matched (probability 0.6666666665100001): -m statistic --mode random --probability 0.33333333349 -j SEP1"; !slices.Contains(res.Outcomes[1].Trace, want) {
		t.Errorf("second path does not say why the first endpoint was not taken:\n%s", res.TraceString())
	}

	// Probabilities 0 and 1 are certain: no choice point.
	tr, err = New([]byte(buildSave("nat -A PREROUTING -m statistic --mode random --probability 1.0 -j DNAT --to-destination 10.1.0.1\n"+
		"nat -A PREROUTING -m statistic --mode random --probability 0 -j DNAT --to-destination 10.1.0.2")), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = tr.Trace(defaultPacket4); err != nil || len(res.Outcomes) != 1 || res.Output() != "10.1.0.1" {
		t.Errorf("certain probabilities: %v, %+v", err, res)
	}
}

func TestTraceRecent(t *testing.T) {
	rules := `nat -A PREROUTING -j SVC
nat -A SVC -m recent --rcheck --seconds 10800 --reap --name SEP2 --mask 255.255.255.255 --rsource -j SEP2
nat -A SVC -m statistic --mode random --probability 0.50000000000 -j SEP1
nat -A SVC -j SEP2
nat -A SEP1 -p tcp -m recent --set --name SEP1 --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.1.0.1:80
nat -A SEP2 -p tcp -m recent --set --name SEP2 --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.1.0.2:80`
	both := []string{"10.1.0.1:80", "10.1.0.2:80"}
	runTraceCases(t, false, nil, defaultPacket4, []traceCase{
		{name: "empty lists", rules: rules, dnat: both, traced: "recent --set SEP1: not recorded"},
		{name: "known client", rules: rules, recent: map[string][]string{"SEP2": {"10.0.0.1"}}, dnat: []string{"10.1.0.2:80"}, paths: 1,
			traced: "recent --rcheck: 10.0.0.1 is in list SEP2"},
		{name: "other client", rules: rules, recent: map[string][]string{"SEP2": {"10.0.0.2"}}, dnat: both},
		{name: "mask", rules: strings.ReplaceAll(rules, "--rcheck --seconds 10800 --reap --name SEP2 --mask 255.255.255.255", "--rcheck --name SEP2 --mask 255.255.255.0"),
			recent: map[string][]string{"SEP2": {"10.0.0.2"}}, dnat: []string{"10.1.0.2:80"}},
		{name: "rdest", rules: "nat -A PREROUTING -m recent --update --name X --rdest -j DNAT --to-destination 10.1.0.1",
			recent: map[string][]string{"X": {"172.30.0.1"}}, dnat: []string{"10.1.0.1"}},
		{name: "! --rcheck", rules: "nat -A PREROUTING -m recent ! --rcheck --name X -j DNAT --to-destination 10.1.0.1", dnat: []string{"10.1.0.1"}},
	})
}
