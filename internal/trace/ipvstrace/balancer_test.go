package ipvstrace

import (
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/trace/ipttrace"
)

func realServer(addr string, port uint16, weight int) ipvs.RealServer {
	return ipvs.RealServer{Address: netip.MustParseAddr(addr), Port: port, Weight: weight}
}

func vs(addr string, proto v1.Protocol, port uint16) ipvs.VirtualServer {
	return ipvs.VirtualServer{Address: netip.MustParseAddr(addr), Protocol: proto, Port: port, Scheduler: "rr"}
}

func conn(dst string, proto uint8, dport uint16) ipttrace.Conn {
	return ipttrace.Conn{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr(dst), Proto: proto, SPort: 40000, DPort: dport, CTState: "new"}
}

func TestBalance(t *testing.T) {
	catchAll := vs("172.30.0.9", v1.ProtocolUDP, 0)
	b, err := NewBalancer(&IPVS{Services: []Service{
		{VS: vs("172.30.0.1", v1.ProtocolTCP, 80), Reals: []ipvs.RealServer{realServer("10.180.0.2", 80, 1), realServer("10.180.0.1", 80, 1), realServer("10.180.0.3", 80, 0)}},
		{VS: vs("172.30.0.2", v1.ProtocolSCTP, 80)},
		{VS: catchAll, Reals: []ipvs.RealServer{realServer("10.180.0.1", 53, 1)}},
		{VS: vs("fd00::1", v1.ProtocolTCP, 80), Reals: []ipvs.RealServer{realServer("fd00::2", 80, 1)}},
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		c       ipttrace.Conn
		taken   bool
		targets []string
		note    string
	}{
		{"equal shares in address order, weight 0 left out", conn("172.30.0.1", 6, 80), true, []string{"10.180.0.1:80 0.5", "10.180.0.2:80 0.5"},
			"real server 10.180.0.3:80 has weight 0"},
		{"other port", conn("172.30.0.1", 6, 81), false, nil, ""},
		{"other protocol", conn("172.30.0.1", 17, 80), false, nil, ""},
		{"no real server", conn("172.30.0.2", 132, 80), true, nil, "ICMP port unreachable"},
		{"port 0 catches every port", conn("172.30.0.9", 17, 5353), true, []string{"10.180.0.1:53 1"}, ""},
		{"no protocol handler", conn("172.30.0.1", 1, 0), false, nil, ""},
		{"the other family's virtual servers are left out", conn("172.30.0.3", 6, 80), false, nil, ""},
	} {
		got, err := b.Balance(tc.c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var targets []string
		for _, tg := range got.Targets {
			targets = append(targets, tg.AddrPort.String()+" "+strconv.FormatFloat(tg.Share, 'g', -1, 64))
		}
		if got.Taken != tc.taken || !reflect.DeepEqual(targets, tc.targets) || !strings.Contains(strings.Join(got.Notes, "\n"), tc.note) {
			t.Errorf("%s: taken %v, targets %q, notes %q; want %v, %q, note %q", tc.name, got.Taken, targets, got.Notes, tc.taken, tc.targets, tc.note)
		}
	}
	c := conn("172.30.0.1", 6, 80)
	c.CTState = "established"
	if _, err := b.Balance(c); err == nil || !strings.Contains(err.Error(), "not modelled") {
		t.Errorf("established: %v", err)
	}
	if _, err := NewBalancer(&IPVS{Services: []Service{{VS: vs("172.30.0.1", v1.ProtocolTCP, 80)}, {VS: vs("172.30.0.1", v1.ProtocolTCP, 80)}}}, false); err == nil {
		t.Error("a virtual server listed twice was accepted")
	}
}

// TestBalancePersistence: a client's template decides while its real server is
// usable; otherwise (gone, or weight 0 with expire_quiescent_template, which
// kube-proxy sets) the client is scheduled anew.
func TestBalancePersistence(t *testing.T) {
	v := vs("172.30.0.1", v1.ProtocolTCP, 80)
	v.Flags, v.Timeout = ipvs.FlagPersistent, 10800
	reals := []ipvs.RealServer{realServer("10.180.0.1", 80, 1), realServer("10.180.0.2", 80, 0)}
	tmpl := func(client, to string) Template {
		return Template{Client: netip.MustParseAddr(client), VS: v.Key(), Real: netip.MustParseAddrPort(to)}
	}
	b, err := NewBalancer(&IPVS{Services: []Service{{VS: v, Reals: reals}}, Templates: []Template{
		tmpl("10.0.0.2", "10.180.0.1:80"), tmpl("10.0.0.3", "10.180.0.2:80"), tmpl("10.0.0.4", "10.180.9.9:80"),
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for client, note := range map[string]string{
		"10.0.0.2": "the client's template sends it to 10.180.0.1:80",
		"10.0.0.3": "template to 10.180.0.2:80 expires",
		"10.0.0.4": "template to 10.180.9.9:80 expires",
		"10.0.0.5": "no template for the client yet",
	} {
		c := conn("172.30.0.1", 6, 80)
		c.Src = netip.MustParseAddr(client)
		got, err := b.Balance(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Targets) != 1 || got.Targets[0].AddrPort.String() != "10.180.0.1:80" || !strings.Contains(strings.Join(got.Notes, "\n"), note) {
			t.Errorf("client %s: %+v, want 10.180.0.1:80 and note %q", client, got, note)
		}
	}
}
