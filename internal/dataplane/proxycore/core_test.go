package proxycore

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kproxy/kproxy/internal/model"
)

func TestNewFillsDefaultsAndRequiresState(t *testing.T) {
	if _, err := New("test", &Config{Family: v1.IPv4Protocol}, time.Hour); err == nil {
		t.Fatal("New accepted a Config without State")
	}
	cfg := Config{Family: v1.IPv4Protocol, State: model.NewState(v1.IPv4Protocol, "node-a")}
	c, err := New("test", &cfg, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FullSyncPeriod != time.Hour || cfg.Clock == nil {
		t.Errorf("defaults not filled in the caller's Config: %+v", cfg)
	}
	now := cfg.Clock.Now()
	if !c.FullSyncDue(now) {
		t.Error("a full sync is not due before any")
	}
	c.LastFullSync = now
	if c.FullSyncDue(now.Add(59 * time.Minute)) {
		t.Error("a full sync is due before FullSyncPeriod passed")
	}
}

func TestRefreshNodePortIPs(t *testing.T) {
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	var listErr error
	cfg := Config{State: model.NewState(v1.IPv4Protocol, "node-a"), NodePortIPs: func() ([]netip.Addr, error) { return ips, listErr }}
	c, err := New("test", &cfg, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var addrs model.NodePortAddresses
	if !c.RefreshNodePortIPs(ctx, &addrs) || len(addrs.IPs) != 1 {
		t.Fatalf("first listing not taken: %v", addrs.IPs)
	}
	if c.RefreshNodePortIPs(ctx, &addrs) {
		t.Error("an unchanged listing reported a change")
	}
	listErr, ips = errors.New("netlink is down"), nil
	if c.RefreshNodePortIPs(ctx, &addrs) || len(addrs.IPs) != 1 {
		t.Errorf("a failed listing changed the addresses: %v", addrs.IPs)
	}
	all := model.NodePortAddresses{All: true}
	if c.RefreshNodePortIPs(ctx, &all) || all.IPs != nil {
		t.Error("all-addresses NodePorts were listed")
	}
}

func TestRenderChanged(t *testing.T) {
	st := model.NewState(v1.IPv4Protocol, "node-a")
	svc := func(name, ip string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
	}
	a, b := svc("a", "198.51.100.1"), svc("b", "198.51.100.2")
	st.OnServiceAdd(a)
	st.OnServiceAdd(b)
	st.Commit()
	st.OnServiceUpdate(a, svc("a", "198.51.100.3"))
	st.OnServiceDelete(b)
	got := RenderChanged(st, st.Commit(), func(v *model.ServicePortView) string { return v.ClusterIP.String() })
	if len(got) != 2 {
		t.Fatalf("RenderChanged = %v, want one changed and one deleted ServicePort", got)
	}
	for name, f := range got {
		switch name.Name {
		case "a":
			if f == nil || *f != "198.51.100.3" {
				t.Errorf("changed ServicePort rendered as %v", f)
			}
		case "b":
			if f != nil {
				t.Errorf("deleted ServicePort rendered as %q, want nil", *f)
			}
		}
	}
}
