package ipset

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/golden"
)

// upstreamSets are the ipvs mode's sets of one family with a few entries
// each, as the proxier would want them.
func upstreamSets(family v1.IPFamily) []Contents {
	prefix, vip, ep, net := "KUBE-", "10.96.0.10", "10.0.0.5", "192.0.2.0/24"
	if family == v1.IPv6Protocol {
		prefix, vip, ep, net = "KUBE-6-", "fd00:10:96::a", "fd00:10::5", "2001:db8::/64"
	}
	return []Contents{
		{Set{Name: prefix + "CLUSTER-IP", Type: HashIPPort, Family: family}, []string{vip + ",udp:53", vip + ",tcp:53"}},
		{Set{Name: prefix + "LOOP-BACK", Type: HashIPPortIP, Family: family}, []string{ep + ",tcp:8080," + ep}},
		{Set{Name: prefix + "LB-SOURCE-CIDR", Type: HashIPPortNet, Family: family}, []string{vip + ",tcp:80," + net}},
		{Set{Name: prefix + "NODE-PORT-TCP", Type: BitmapPort}, []string{"30080", "30443"}},
		{Set{Name: prefix + "IPVS-IPS", Type: HashIP, Family: family}, []string{vip}},
	}
}

func TestPlanCreatesEverything(t *testing.T) {
	desired := append(upstreamSets(v1.IPv4Protocol), upstreamSets(v1.IPv6Protocol)...)
	got := Plan(desired, map[string][]string{"OTHER": {"1.2.3.4"}})
	golden.Check(t, "plan-create.restore", string(got))

	// The script is valid for the fake (and so in the notation save prints),
	// and after it the sets hold what was desired.
	f := NewFake()
	mustDo(t, f.Restore(context.Background(), got))
	checkHolds(t, f, desired)
}

func TestPlanConverges(t *testing.T) {
	desired := []Contents{
		{Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, Family: v1.IPv4Protocol}, []string{"10.96.0.1,tcp:443", "10.96.0.10,udp:53", "10.96.0.10,udp:53"}},
		{Set{Name: "KUBE-NODE-PORT-TCP", Type: BitmapPort}, []string{"30080"}},
		{Set{Name: "KUBE-LOAD-BALANCER", Type: HashIPPort}, nil},
	}
	current := map[string][]string{
		"KUBE-CLUSTER-IP":    {"10.96.0.10,udp:53", "10.96.0.2,tcp:80", "10.96.0.3,sctp:3868"},
		"KUBE-NODE-PORT-TCP": {"30080"},
		"KUBE-LOAD-BALANCER": {"192.0.2.1,tcp:80"},
		"KUBE-STALE-SET":     {"10.0.0.1"},
	}
	got := Plan(desired, current)
	golden.Check(t, "plan-converge.restore", string(got))

	if again := Plan(desired, map[string][]string{
		"KUBE-CLUSTER-IP":    {"10.96.0.1,tcp:443", "10.96.0.10,udp:53"},
		"KUBE-NODE-PORT-TCP": {"30080"},
		"KUBE-LOAD-BALANCER": {},
	}); len(again) != 0 {
		t.Errorf("Plan of a converged state = %q, want nothing", again)
	}
}

func TestCreateLine(t *testing.T) {
	for _, tc := range []struct {
		set  Set
		want string
	}{
		{Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort}, "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536"},
		{Set{Name: "KUBE-6-IPVS-IPS", Type: HashIP, Family: v1.IPv6Protocol}, "create KUBE-6-IPVS-IPS hash:ip family inet6 hashsize 1024 maxelem 65536"},
		{Set{Name: "KUBE-NODE-PORT-UDP", Type: BitmapPort, Family: v1.IPv6Protocol}, "create KUBE-NODE-PORT-UDP bitmap:port range 0-65535"},
	} {
		if got := CreateLine(tc.set); got != tc.want {
			t.Errorf("CreateLine(%+v) = %q, want %q", tc.set, got, tc.want)
		}
	}
}

func checkHolds(t *testing.T, ipset Interface, desired []Contents) {
	t.Helper()
	for _, c := range desired {
		got, err := ipset.Entries(context.Background(), c.Set.Name)
		mustDo(t, err)
		if diff := cmp.Diff(sortedUnique(c.Entries), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("set %s (-want +got):\n%s", c.Set.Name, diff)
		}
	}
}

func mustDo(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
