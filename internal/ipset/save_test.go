package ipset

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestParseSaveSets: each set's type and family from its create line, its
// entries sorted, the options after an entry kept by entry, a set only added to
// listed without a type.
func TestParseSaveSets(t *testing.T) {
	out := `create KUBE-6-IPVS-IPS hash:ip family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5c1a2b3c
add KUBE-6-IPVS-IPS fd00::2
add KUBE-6-IPVS-IPS fd00::1
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080 timeout 5
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add OTHER 10.0.0.0/8 nomatch
`
	got, err := ParseSaveSets([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []SavedSet{
		{Contents: Contents{Set: Set{Name: "KUBE-6-IPVS-IPS", Type: HashIP, Family: v1.IPv6Protocol}, Entries: []string{"fd00::1", "fd00::2"}}},
		{Contents: Contents{Set: Set{Name: "KUBE-NODE-PORT-TCP", Type: BitmapPort}, Entries: []string{"30080"}},
			Options: map[string]string{"30080": "timeout 5"}},
		{Contents: Contents{Set: Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, Family: v1.IPv4Protocol}, Entries: []string{}}},
		{Contents: Contents{Set: Set{Name: "OTHER"}, Entries: []string{"10.0.0.0/8"}}, Options: map[string]string{"10.0.0.0/8": "nomatch"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"flush X\n", "add X\n", "create X\n"} {
		if _, err := ParseSaveSets([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
