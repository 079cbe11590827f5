package nftables

import "github.com/kproxy/kproxy/internal/nft"

// familySetTypes are the types of a family's sets and maps, one value each that
// every container of that type shares (there are thousands of endpoint maps).
type familySetTypes struct {
	addr        *nft.SetType // ipv4_addr
	hairpin     *nft.SetType // ipv4_addr . ipv4_addr . inet_proto . inet_service
	addrVerdict *nft.SetType // ipv4_addr . inet_proto . inet_service : verdict
	portVerdict *nft.SetType // inet_proto . inet_service : verdict
	// endpoints and nodePortEndpoints are the endpoint maps' types by protocol
	// (endpoints.go): typeof ip daddr . tcp dport . numgen random mod 1 : ip daddr
	// . tcp dport, and the same keyed by tcp dport . numgen random mod 1.
	endpoints, nodePortEndpoints map[nft.Proto]*nft.SetType
}

var setTypes = map[nft.Family]*familySetTypes{nft.IPv4: newFamilySetTypes(nft.IPv4), nft.IPv6: newFamilySetTypes(nft.IPv6)}

func newFamilySetTypes(f nft.Family) *familySetTypes {
	addr := nft.TypeIPv4Addr
	if f == nft.IPv6 {
		addr = nft.TypeIPv6Addr
	}
	verdict := []nft.DataType{nft.TypeVerdict}
	t := &familySetTypes{
		addr:        &nft.SetType{Key: []nft.DataType{addr}},
		hairpin:     &nft.SetType{Key: []nft.DataType{addr, addr, nft.TypeInetProto, nft.TypeInetService}},
		addrVerdict: &nft.SetType{Key: []nft.DataType{addr, nft.TypeInetProto, nft.TypeInetService}, Data: verdict},
		portVerdict: &nft.SetType{Key: []nft.DataType{nft.TypeInetProto, nft.TypeInetService}, Data: verdict},
		endpoints:   map[nft.Proto]*nft.SetType{}, nodePortEndpoints: map[nft.Proto]*nft.SetType{},
	}
	slot := nft.Numgen(1)
	for _, p := range []nft.Proto{nft.TCP, nft.UDP, nft.SCTP} {
		dport, _ := nft.Dport(p)
		data := []nft.Key{nft.Daddr(f), dport}
		t.endpoints[p] = &nft.SetType{KeyOf: []nft.Key{nft.Daddr(f), dport, slot}, DataOf: data}
		t.nodePortEndpoints[p] = &nft.SetType{KeyOf: []nft.Key{dport, slot}, DataOf: data}
	}
	return t
}
