package ipset

import v1 "k8s.io/api/core/v1"

// Type is an ipset type, as the ipset tool names it.
type Type string

// The set types the ipvs mode uses (upstream's).
const (
	HashIPPort    Type = "hash:ip,port"
	HashIPPortIP  Type = "hash:ip,port,ip"
	HashIPPortNet Type = "hash:ip,port,net"
	HashIP        Type = "hash:ip"
	BitmapPort    Type = "bitmap:port"
)

// Set is one set's definition.
type Set struct {
	Name string
	Type Type
	// Family is the address family of hash:* sets (ignored for bitmap:port).
	Family v1.IPFamily
	// Comment says what the set is for; the ipvs mode's iptables rules that
	// match the set carry it (upstream's getComment). It is not stored in the
	// kernel: upstream creates its sets without the "comment" option, and a
	// set created with other options than an existing one of the same name
	// would fail `create -exist`, so kproxy creates them exactly as upstream.
	Comment string
}

// Contents is a set with the entries it must hold, each written as `ipset save`
// prints it ("10.96.0.10,tcp:53", "10.0.0.1,tcp:80,10.0.0.1",
// "192.0.2.1,tcp:80,198.51.100.0/24", "30080").
type Contents struct {
	Set     Set
	Entries []string
}
