package nftnetlink

import (
	"fmt"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
)

// TestEquivalentTypeofMaps checks the typeof maps and named-map DNAT rules of the
// renderer's endpoint selection against nft, for each protocol and family,
// including rules and elements added by a later transaction (the executor then
// reads the map's types back from the kernel, nft from its cache).
func TestEquivalentTypeofMaps(t *testing.T) {
	needRoot(t)
	for _, fam := range []struct {
		family           knftables.Family
		x, vip, ep1, ep2 string
	}{
		{knftables.IPv4Family, "ip", "172.30.0.1", "10.0.0.1", "10.0.0.2"},
		{knftables.IPv6Family, "ip6", "fd30::1", "fd10::1", "fd10::2"},
	} {
		for _, proto := range []string{"tcp", "udp", "sctp"} {
			t.Run(string(fam.family)+"/"+proto, func(t *testing.T) {
				create := fmt.Sprintf(`add table %[1]s kube-proxy
add chain %[1]s kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain %[1]s kube-proxy svc
add map %[1]s kube-proxy eps { typeof %[1]s daddr . %[5]s dport . numgen random mod 1 : %[1]s daddr . %[5]s dport ; }
add map %[1]s kube-proxy np-eps { typeof %[5]s dport . numgen random mod 1 : %[1]s daddr . %[5]s dport ; }
add rule %[1]s kube-proxy nat-prerouting jump svc
add rule %[1]s kube-proxy svc dnat %[1]s addr . port to %[1]s daddr . %[5]s dport . numgen random mod 2 map @eps
add rule %[1]s kube-proxy svc dnat %[1]s addr . port to %[5]s dport . numgen random mod 2 map @np-eps
add element %[1]s kube-proxy eps { %[2]s . 80 . 0 : %[3]s . 8080 }
add element %[1]s kube-proxy eps { %[2]s . 80 . 1 : %[4]s . 8080 }
add element %[1]s kube-proxy np-eps { 30080 . 0 : %[3]s . 53 }
`, fam.x, fam.vip, fam.ep1, fam.ep2, proto)
				change := fmt.Sprintf(`add chain %[1]s kube-proxy svc2
add rule %[1]s kube-proxy svc2 dnat %[1]s addr . port to %[1]s daddr . %[4]s dport . numgen random mod 1 map @eps
add rule %[1]s kube-proxy svc2 dnat %[1]s addr . port to %[4]s dport . numgen random mod 1 map @np-eps
delete element %[1]s kube-proxy eps { %[2]s . 80 . 1 }
add element %[1]s kube-proxy eps { %[2]s . 80 . 1 : %[3]s . 9090 }
add element %[1]s kube-proxy np-eps { 30080 . 1 : %[3]s . 53 }
`, fam.x, fam.vip, fam.ep1, proto)
				compareScripts(t, fam.family, "kube-proxy", create, change)
			})
		}
	}
}

// TestTypeofUnsupported: typeofs the executor cannot write fail, when nfttext
// reads them or when the set is encoded.
func TestTypeofUnsupported(t *testing.T) {
	for _, typ := range []string{"numgen random mod 1 : ip daddr . th dport", "ip daddr . icmp type : ip daddr . th dport", "ip daddr . tcp dport", "ip daddr . ct state : ip daddr . th dport"} {
		var p nfttext.CommandParser
		cmd, err := p.Parse("add map ip kube-proxy m { typeof " + typ + " ; }")
		if err == nil {
			_, _, _, err = typeofSpec(cmd.Op.Type.KeyOf, cmd.Op.Type.DataOf, true)
		}
		if err == nil {
			t.Errorf("typeof %s: no error", typ)
		}
	}
}
