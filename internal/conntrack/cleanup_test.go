package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// flow builds a conntrack entry from "client -> frontend" and the DNAT target
// ("reply source"); ports are part of the addresses.
func flow(proto uint8, client, frontend, target string) *netlink.ConntrackFlow {
	c, f, t := netip.MustParseAddrPort(client), netip.MustParseAddrPort(frontend), netip.MustParseAddrPort(target)
	ct := &netlink.ConntrackFlow{}
	ct.Forward.Protocol = proto
	ct.Forward.SrcIP, ct.Forward.SrcPort = net.IP(c.Addr().AsSlice()), c.Port()
	ct.Forward.DstIP, ct.Forward.DstPort = net.IP(f.Addr().AsSlice()), f.Port()
	ct.Reverse.Protocol = proto
	ct.Reverse.SrcIP, ct.Reverse.SrcPort = net.IP(t.Addr().AsSlice()), t.Port()
	ct.Reverse.DstIP, ct.Reverse.DstPort = net.IP(c.Addr().AsSlice()), c.Port()
	return ct
}

func udp(client, frontend, target string) *netlink.ConntrackFlow {
	return flow(unix.IPPROTO_UDP, client, frontend, target)
}

func describe(flows []*netlink.ConntrackFlow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, fmt.Sprintf("%d %s -> %s", f.Forward.Protocol,
			net.JoinHostPort(f.Forward.DstIP.String(), strconv.Itoa(int(f.Forward.DstPort))),
			net.JoinHostPort(f.Reverse.SrcIP.String(), strconv.Itoa(int(f.Reverse.SrcPort)))))
	}
	slices.Sort(out)
	return out
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func eps(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range s {
		out = append(out, netip.MustParseAddrPort(a))
	}
	return out
}

func TestStaleFlows(t *testing.T) {
	dns := Service{
		Protocol:         v1.ProtocolUDP,
		ClusterIP:        netip.MustParseAddr("10.96.0.10"),
		Port:             53,
		NodePort:         30053,
		ExternalIPs:      addrs("192.0.2.10"),
		LoadBalancerVIPs: addrs("198.51.100.10"),
		ServingEndpoints: eps("10.244.0.5:5353", "10.244.1.5:5353"),
	}
	scaledToZero := Service{
		Protocol:         v1.ProtocolUDP,
		ClusterIP:        netip.MustParseAddr("10.96.0.20"),
		Port:             8125,
		NodePort:         30125,
		LoadBalancerVIPs: addrs("198.51.100.20"),
	}
	tcpSvc := Service{
		Protocol:         v1.ProtocolTCP,
		ClusterIP:        netip.MustParseAddr("10.96.0.30"),
		Port:             80,
		ServingEndpoints: eps("10.244.0.7:8080"),
	}
	v6 := Service{
		Protocol:         v1.ProtocolUDP,
		ClusterIP:        netip.MustParseAddr("fd00:10:96::a"),
		Port:             53,
		ServingEndpoints: eps("[fd00:10:244::5]:53"),
	}

	tests := []struct {
		name     string
		services []Service
		entries  []*netlink.ConntrackFlow
		want     []string
	}{
		{
			name:     "cluster IP: DNAT to a serving endpoint is kept, to anything else deleted",
			services: []Service{dns},
			entries: []*netlink.ConntrackFlow{
				udp("10.244.2.2:40000", "10.96.0.10:53", "10.244.0.5:5353"),
				udp("10.244.2.2:40001", "10.96.0.10:53", "10.244.9.9:5353"),
				udp("10.244.2.2:40002", "10.96.0.10:53", "10.244.0.5:53"),
				// not DNATed at all (sent before the rules existed)
				udp("10.244.2.2:40003", "10.96.0.10:53", "10.96.0.10:53"),
				// another port of the cluster IP is not a frontend
				udp("10.244.2.2:40004", "10.96.0.10:54", "10.244.9.9:54"),
			},
			want: []string{
				"17 10.96.0.10:53 -> 10.244.0.5:53",
				"17 10.96.0.10:53 -> 10.244.9.9:5353",
				"17 10.96.0.10:53 -> 10.96.0.10:53",
			},
		},
		{
			name:     "external IP, load balancer VIP and NodePort frontends",
			services: []Service{dns},
			entries: []*netlink.ConntrackFlow{
				udp("203.0.113.1:1000", "192.0.2.10:53", "10.244.1.5:5353"),
				udp("203.0.113.1:1001", "192.0.2.10:53", "10.244.3.3:5353"),
				udp("203.0.113.1:1002", "198.51.100.10:53", "10.244.3.3:5353"),
				udp("203.0.113.1:1003", "192.168.1.1:30053", "10.244.0.5:5353"),
				udp("203.0.113.1:1004", "192.168.1.1:30053", "10.244.3.3:5353"),
				udp("203.0.113.1:1005", "192.168.1.1:30054", "10.244.3.3:5353"),
			},
			want: []string{
				"17 192.0.2.10:53 -> 10.244.3.3:5353",
				"17 192.168.1.1:30053 -> 10.244.3.3:5353",
				"17 198.51.100.10:53 -> 10.244.3.3:5353",
			},
		},
		{
			name:     "service scaled to zero: IP frontends cleared, NodePort left alone",
			services: []Service{scaledToZero},
			entries: []*netlink.ConntrackFlow{
				udp("10.244.2.2:40000", "10.96.0.20:8125", "10.244.0.9:8125"),
				udp("203.0.113.1:1000", "198.51.100.20:8125", "10.244.0.9:8125"),
				udp("203.0.113.1:1001", "192.168.1.1:30125", "10.244.0.9:8125"),
				udp("203.0.113.1:1002", "203.0.113.50:30125", "203.0.113.50:30125"),
			},
			want: []string{
				"17 10.96.0.20:8125 -> 10.244.0.9:8125",
				"17 198.51.100.20:8125 -> 10.244.0.9:8125",
			},
		},
		{
			name:     "TCP services and TCP flows are ignored",
			services: []Service{tcpSvc, dns},
			entries: []*netlink.ConntrackFlow{
				flow(unix.IPPROTO_TCP, "10.244.2.2:40000", "10.96.0.30:80", "10.244.9.9:8080"),
				flow(unix.IPPROTO_TCP, "10.244.2.2:40001", "10.96.0.10:53", "10.244.9.9:53"),
			},
		},
		{
			name:     "IPv6",
			services: []Service{v6},
			entries: []*netlink.ConntrackFlow{
				udp("[fd00:10:244::2]:40000", "[fd00:10:96::a]:53", "[fd00:10:244::5]:53"),
				udp("[fd00:10:244::2]:40001", "[fd00:10:96::a]:53", "[fd00:10:244::6]:53"),
			},
			want: []string{"17 [fd00:10:96::a]:53 -> [fd00:10:244::6]:53"},
		},
		{
			name:     "no services: nothing is stale",
			services: nil,
			entries:  []*netlink.ConntrackFlow{udp("10.244.2.2:40000", "10.96.0.10:53", "10.244.9.9:53")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(StaleFlows(tc.entries, tc.services))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stale flows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleFlowsIPv4MappedAddresses(t *testing.T) {
	// netlink may hand back 16-byte forms of IPv4 addresses.
	f := udp("10.244.2.2:40000", "10.96.0.10:53", "10.244.9.9:53")
	f.Forward.DstIP = f.Forward.DstIP.To16()
	f.Reverse.SrcIP = f.Reverse.SrcIP.To16()
	svc := Service{Protocol: v1.ProtocolUDP, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 53,
		ServingEndpoints: eps("[::ffff:10.244.0.5]:53")}
	if got := StaleFlows([]*netlink.ConntrackFlow{f}, []Service{svc}); len(got) != 1 {
		t.Fatalf("want the flow stale, got %d", len(got))
	}
	f.Reverse.SrcIP = net.ParseIP("10.244.0.5").To16()
	if got := StaleFlows([]*netlink.ConntrackFlow{f}, []Service{svc}); len(got) != 0 {
		t.Fatalf("want the flow kept, got %d", len(got))
	}
}

func TestCleanStaleEntries(t *testing.T) {
	ctx := context.Background()
	svc := Service{Protocol: v1.ProtocolUDP, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 53,
		ServingEndpoints: eps("10.244.0.5:53")}
	keep := udp("10.244.2.2:40000", "10.96.0.10:53", "10.244.0.5:53")
	stale := udp("10.244.2.2:40001", "10.96.0.10:53", "10.244.0.6:53")
	other := udp("10.244.2.2:40002", "10.96.0.99:53", "10.244.0.6:53")

	ct := NewFake()
	ct.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{keep, stale, other})
	ct.SetEntries(v1.IPv6Protocol, []*netlink.ConntrackFlow{udp("[fd00::1]:1", "[fd00::a]:53", "[fd00::b]:53")})

	n, err := CleanStaleEntries(ctx, ct, v1.IPv4Protocol, []Service{svc})
	if err != nil || n != 1 {
		t.Fatalf("CleanStaleEntries = %d, %v; want 1, nil", n, err)
	}
	if diff := cmp.Diff(describe([]*netlink.ConntrackFlow{keep, other}), describe(ct.Entries(v1.IPv4Protocol))); diff != "" {
		t.Errorf("remaining entries (-want +got):\n%s", diff)
	}
	if len(ct.Entries(v1.IPv6Protocol)) != 1 {
		t.Errorf("IPv6 table touched")
	}

	// A partial listing (EINTR) is still reconciled.
	ct.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{keep, stale})
	ct.SetListError(unix.EINTR)
	if n, err := CleanStaleEntries(ctx, ct, v1.IPv4Protocol, []Service{svc}); err != nil || n != 1 {
		t.Fatalf("partial listing: CleanStaleEntries = %d, %v; want 1, nil", n, err)
	}

	// Any other listing error aborts without deleting.
	ct.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{keep, stale})
	ct.SetListError(unix.EPERM)
	if n, err := CleanStaleEntries(ctx, ct, v1.IPv4Protocol, []Service{svc}); err == nil || n != 0 {
		t.Fatalf("list error: CleanStaleEntries = %d, %v; want 0, error", n, err)
	}
	if len(ct.Entries(v1.IPv4Protocol)) != 2 {
		t.Errorf("entries deleted despite list error")
	}
}

func TestDeleteEntriesMatchesWholeTuples(t *testing.T) {
	ct := NewFake()
	a := udp("10.0.0.1:1", "10.96.0.10:53", "10.244.0.5:53")
	// Same original tuple but another DNAT target: a new flow, not the listed one.
	b := udp("10.0.0.1:1", "10.96.0.10:53", "10.244.0.6:53")
	ct.SetEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{b})
	n, err := ct.DeleteEntries(v1.IPv4Protocol, []*netlink.ConntrackFlow{a})
	if err != nil || n != 0 {
		t.Fatalf("DeleteEntries = %d, %v; want 0, nil", n, err)
	}
	if n, err := ct.DeleteEntries(v1.IPv4Protocol, nil); err != nil || n != 0 {
		t.Fatalf("DeleteEntries(nil) = %d, %v", n, err)
	}
	if _, err := ct.ListEntries("IPv5"); err == nil {
		t.Fatal("expected error for unknown family")
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
