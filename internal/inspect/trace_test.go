package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/golden"
	"github.com/kproxy/kproxy/internal/trace"
)

// TestLookup: every way a destination reaches a ServicePort, and none.
func TestLookup(t *testing.T) {
	families := testFamilies(t)
	for _, tc := range []struct {
		ip    string
		port  int32
		proto v1.Protocol
		want  string // namespace/name as, space separated
	}{
		{"10.96.0.10", 80, v1.ProtocolTCP, "default/web:ClusterIP"},
		{"10.96.0.10", 80, v1.ProtocolUDP, ""},
		{"10.96.0.10", 81, v1.ProtocolTCP, ""},
		{"203.0.113.10", 80, v1.ProtocolTCP, "default/web:LoadBalancerIP"},
		{"192.0.2.7", 30080, v1.ProtocolTCP, "default/web:NodePort"}, // NodePort addresses "all"
		{"192.0.2.50", 80, v1.ProtocolTCP, "zones/hinted:ExternalIP"},
		{"::1", 30080, v1.ProtocolTCP, ""}, // no IPv6 family
	} {
		l := BuildLookup(families, netip.MustParseAddr(tc.ip), tc.port, tc.proto)
		var got []string
		for _, m := range l.Matches {
			got = append(got, m.Namespace+"/"+m.Name+":"+m.As)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("lookup %s:%d/%s: %v, want %q", tc.ip, tc.port, tc.proto, got, tc.want)
		}
	}
}

// TestTraceDocument: a traced packet joined with the model, as JSON and as the
// table `kube-proxy trace` prints, against testdata.
func TestTraceDocument(t *testing.T) {
	families := testFamilies(t)
	dest := BuildLookup(families, netip.MustParseAddr("203.0.113.10"), 80, v1.ProtocolTCP)
	common := []string{
		"chain ip kube-proxy filter-prerouting-pre-dnat (hook prerouting, type filter, priority -110)",
		"  [filter-prerouting-pre-dnat] ct state new jump firewall-check",
		"chain ip kube-proxy nat-prerouting (hook prerouting, type nat, priority -100)",
		"  [services] ip daddr . meta l4proto . th dport vmap @service-ips",
	}
	res := trace.Aggregate([]trace.Outcome{
		{Verdict: trace.Accept, DNAT: "10.244.1.5:8080", Probability: 0.5, Trace: append(append([]string{}, common...), "    numgen random mod 2: chose 0", "  [service] dnat to 10.244.1.5:8080")},
		{Verdict: trace.Accept, DNAT: "10.244.2.6:8080", Probability: 0.5, Masquerade: true, Trace: append(append([]string{}, common...), "    numgen random mod 2: chose 1", "  [service] dnat to 10.244.2.6:8080")},
	})
	pkt := TracePacket{Family: "IPv4", Protocol: "tcp", Source: "198.51.100.7:40000", Destination: "203.0.113.10:80",
		InputInterface: "eth0", CTState: "new"}
	doc := BuildTrace(testNode, "nftables", "nft list table ip kube-proxy", pkt, res, dest)
	if len(doc.Outcomes) != 2 || doc.Outcomes[0].Endpoint == nil || doc.Outcomes[0].Endpoint.Name != "web" {
		t.Fatalf("outcomes %+v", doc.Outcomes)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-loadbalancer.json", string(b)+"\n")
	var table bytes.Buffer
	if err := PrintTrace(&table, doc); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-loadbalancer.txt", table.String())

	// A rejected packet to an unknown address, its probability not given.
	rej := trace.Aggregate([]trace.Outcome{{Verdict: trace.Reject, Trace: []string{"  [cluster-ips-check] ip daddr @cluster-ips reject"}}})
	none := BuildLookup(families, netip.MustParseAddr("10.96.0.99"), 80, v1.ProtocolTCP)
	doc = BuildTrace(testNode, "nftables", "nft list table ip kube-proxy", TracePacket{Family: "IPv4", Protocol: "tcp",
		Source: "10.244.1.5:40000", Destination: "10.96.0.99:80", LocallyGenerated: true, CTState: "new"}, rej, none)
	if doc.Outcomes[0].Probability != 1 {
		t.Errorf("probability %v, want 1 when the evaluator gives none", doc.Outcomes[0].Probability)
	}
	table.Reset()
	if err := PrintTrace(&table, doc); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-reject.txt", table.String())
}

// TestLookupHandler reads lookup through the handler and the client, and its
// errors.
func TestLookupHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(&Source{NodeName: testNode, Mode: "nftables", Families: testFamilies(t)}))
	defer srv.Close()
	c := &Client{Address: strings.TrimPrefix(srv.URL, "http://")}
	var l Lookup
	if err := c.Get(context.Background(), "lookup", url.Values{"ip": {"10.96.0.11"}, "port": {"80"}, "protocol": {"tcp"}}, &l); err != nil {
		t.Fatal(err)
	}
	if l.Kind != "Lookup" || len(l.Matches) != 1 || l.Matches[0].Name != "empty" || l.Matches[0].Port.Internal.Verdict != VerdictReject {
		t.Errorf("lookup of default/empty: %+v", l)
	}
	for _, q := range []string{"ip=x&port=80", "ip=10.0.0.1&port=70000", "ip=10.0.0.1&port=80&protocol=icmp"} {
		resp, err := http.Get(srv.URL + PathPrefix + "lookup?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("lookup?%s: %s, want 400", q, resp.Status)
		}
	}
}
