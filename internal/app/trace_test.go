package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/trace/live"
)

// fakeState answers the state API's node and lookup documents.
type fakeState struct {
	node    inspect.Node
	lookups map[string]inspect.Lookup // by "ip port protocol"
	asked   []string
}

func (f *fakeState) Get(_ context.Context, path string, q url.Values, v any) error {
	f.asked = append(f.asked, path+"?"+q.Encode())
	var doc any
	switch path {
	case "node":
		doc = &f.node
	case "lookup":
		l, ok := f.lookups[q.Get("ip")+" "+q.Get("port")+" "+q.Get("protocol")]
		if !ok {
			l = inspect.Lookup{Kind: "Lookup", IP: q.Get("ip"), Matches: []inspect.LookupMatch{}}
		}
		doc = &l
	default:
		return fmt.Errorf("no such document: %s", path)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// traceFixture is a node in nftables mode whose kernel holds the listing of
// testdata, as nft 1.0.6 lists what kproxy wrote: ns2/svc2, a LoadBalancer
// 1.2.3.4 with the source ranges 192.168.0.0/24 and 203.0.113.0/25 and one
// endpoint, 10.180.0.2.
func traceFixture(t *testing.T) (*fakeState, *live.Fake) {
	t.Helper()
	listing, err := os.ReadFile("testdata/trace-listing-ip.nft")
	if err != nil {
		t.Fatal(err)
	}
	state := &fakeState{
		node: inspect.Node{Kind: "Node", NodeName: "node-a", Mode: "nftables"},
		lookups: map[string]inspect.Lookup{"1.2.3.4 80 tcp": {Kind: "Lookup", IP: "1.2.3.4", Port: 80, Protocol: "TCP",
			Matches: []inspect.LookupMatch{{Namespace: "ns2", Name: "svc2", As: inspect.AsLoadBalancerIP, Port: inspect.ServicePort{
				PortID: inspect.PortID{Family: "IPv4", Name: "p80", Protocol: "TCP", Port: 80, ClusterIP: "172.30.0.42"},
				Endpoints: []inspect.Endpoint{
					{Address: "10.180.0.1:80", NodeName: "node-b", Internal: inspect.Used, External: "NotOnThisNode", ExternalFromNode: inspect.Used},
					{Address: "10.180.0.2:80", NodeName: "node-a", IsLocal: true, Internal: inspect.Used, External: inspect.Used, ExternalFromNode: inspect.Used},
				}}}}}},
	}
	reader := &live.Fake{
		Listings:  map[string]string{"ip kube-proxy": string(listing)},
		Addresses: map[v1.IPFamily][]netip.Addr{v1.IPv4Protocol: {netip.MustParseAddr("192.168.0.2")}},
	}
	return state, reader
}

// TestRunTrace composes the state API, the live reader and the evaluator: the
// load balancer's allowed and denied sources, a pod short-circuited to the
// Cluster selection, and the errors.
func TestRunTrace(t *testing.T) {
	state, reader := traceFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		req      traceRequest
		verdict  string
		dnat     []string
		masq     bool
		endpoint bool
	}{
		{"allowed source", traceRequest{src: "203.0.113.5", dst: "1.2.3.4:80", iif: "eth0"}, "ACCEPT", []string{"10.180.0.2:80"}, true, true},
		{"another allowed range", traceRequest{src: "192.168.0.7:1234", dst: "1.2.3.4:80/tcp", iif: "eth0"}, "ACCEPT", []string{"10.180.0.2:80"}, true, true},
		{"denied source", traceRequest{src: "198.51.100.1:1234", dst: "1.2.3.4:80/tcp", iif: "eth0"}, "DROP", nil, false, false},
		{"denied pod", traceRequest{src: "10.0.0.9", dst: "1.2.3.4:80", iif: "veth0"}, "DROP", nil, false, false},
		{"udp is not the Service's", traceRequest{src: "203.0.113.5", dst: "1.2.3.4:80/udp", iif: "eth0"}, "ACCEPT", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := runTrace(ctx, state, reader, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var dnat []string
			for _, o := range doc.Outcomes {
				if o.DNAT != "" {
					dnat = append(dnat, o.DNAT)
				}
				if o.Masquerade != tc.masq {
					t.Errorf("outcome %s: masquerade %v, want %v", o.DNAT, o.Masquerade, tc.masq)
				}
				if (o.Endpoint != nil) != tc.endpoint {
					t.Errorf("outcome %s: endpoint %+v", o.DNAT, o.Endpoint)
				}
			}
			if doc.Verdict != tc.verdict || strings.Join(dnat, " ") != strings.Join(tc.dnat, " ") {
				t.Errorf("verdict %s DNAT %v, want %s %v\n%+v", doc.Verdict, dnat, tc.verdict, tc.dnat, doc)
			}
			if doc.Kind != "Trace" || doc.Mode != "nftables" || doc.NodeName != "node-a" || doc.Ruleset != "nft list table ip kube-proxy" ||
				doc.Packet.LocallyGenerated || doc.Packet.InputInterface != tc.req.iif {
				t.Errorf("document %+v", doc)
			}
		})
	}

	for _, tc := range []struct {
		req  traceRequest
		want string
	}{
		{traceRequest{src: "10.0.0.1", dst: "1.2.3.4"}, "--dst"},
		{traceRequest{src: "10.0.0.1", dst: "1.2.3.4:80/icmp"}, "not tcp, udp or sctp"},
		{traceRequest{src: "nope", dst: "1.2.3.4:80"}, "--src"},
		{traceRequest{src: "fd00::1", dst: "1.2.3.4:80"}, "different IP families"},
		{traceRequest{src: "fd00::1", dst: "[fd00::2]:80"}, "no table ip6 kube-proxy"},
	} {
		if _, err := runTrace(ctx, state, reader, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runTrace(%+v): %v, want an error containing %q", tc.req, err, tc.want)
		}
	}
	state.node.Mode = "userspace"
	if _, err := runTrace(ctx, state, reader, traceRequest{src: "10.0.0.1", dst: "1.2.3.4:80"}); err == nil || !strings.Contains(err.Error(), "userspace") {
		t.Errorf("userspace mode: %v", err)
	}
}

// TestTraceCommandDefaults: the packet's defaults (source port 40000, tcp, new,
// locally generated without --iif) and the flags' validation.
func TestTraceCommandDefaults(t *testing.T) {
	req := traceRequest{src: "10.0.0.1", dst: "10.96.0.1:443"}
	p, desc, err := req.packet()
	if err != nil {
		t.Fatal(err)
	}
	if p.SourcePort != 40000 || p.Protocol != "tcp" || p.CTState != "new" || !p.LocallyGenerated || desc.Source != "10.0.0.1:40000" || desc.Family != "IPv4" {
		t.Errorf("packet %+v %+v", p, desc)
	}
	var out, errOut bytes.Buffer
	if code := ExecuteTool(context.Background(), []string{"trace", "--dst", "10.96.0.1:443"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "--src and --dst are required") {
		t.Errorf("trace without --src: exit %d, %s", code, errOut.String())
	}
	if !IsToolInvocation([]string{"trace"}) {
		t.Error("trace is not a tool")
	}
}
