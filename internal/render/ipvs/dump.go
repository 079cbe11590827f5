package ipvs

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
)

// Dump renders the desired state for people and expected-output tests, in the
// notation of the tools that list each part: the addresses of kube-ipvs0 (one a
// line), the virtual servers as `ipvsadm -Ln` prints them (with the ServicePort
// and kind of each as a comment), the sets as `ipset save` does (create lines
// shortened to name, type and family, with upstream's comment of the set as a
// comment), and the chains as iptables-save does.
func (d *Desired) Dump() string {
	var b strings.Builder
	b.WriteString("# " + DummyDevice + "\n")
	for _, a := range d.Addresses {
		b.WriteString(a.String() + "\n")
	}
	b.WriteString("# ipvsadm -Ln\n")
	for i := range d.Services {
		writeService(&b, &d.Services[i])
	}
	b.WriteString("# ipset save\n")
	for i := range d.Sets {
		writeSet(&b, &d.Sets[i])
	}
	b.WriteString("# iptables-save\n")
	b.WriteString(ipt.NewState(&d.Rules, nil).Dump())
	return b.String()
}

// Describe returns the fragment's kernel objects, one line each, for people (the
// state API, `kube-proxy explain`): its virtual servers and real servers as
// `ipvsadm -Ln` prints them, the addresses it binds on kube-ipvs0, and its set
// entries as `ipset add` commands, with the set names of family. The writers do
// not use it.
func (f *Fragment) Describe(family v1.IPFamily) []string {
	var b strings.Builder
	for i := range f.Services {
		writeService(&b, &f.Services[i])
	}
	for _, a := range f.Bind {
		b.WriteString("ip address add " + a.String() + " dev " + DummyDevice + "\n")
	}
	for _, e := range f.Entries {
		b.WriteString("ipset add " + SetName(e.Set, family) + " " + e.Entry + "\n")
	}
	for _, k := range f.NodeBlocked {
		b.WriteString("# the node may not reach " + k.String() + " (" + ChainIPVSOutFilter + ")\n")
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func writeService(b *strings.Builder, s *Service) {
	vs := &s.VS
	fmt.Fprintf(b, "%-4s %s %s", vs.Protocol, netip.AddrPortFrom(vs.Address, vs.Port), vs.Scheduler)
	if flags := schedulerFlags(vs); flags != "" {
		b.WriteString(" (" + flags + ")")
	}
	if vs.Flags&ipvs.FlagPersistent != 0 {
		fmt.Fprintf(b, " persistent %d", vs.Timeout)
	}
	fmt.Fprintf(b, "  # %s %s\n", s.Port, s.Kind)
	for _, rs := range s.Reals {
		fmt.Fprintf(b, "  -> %s Masq %d\n", rs.AddrPort(), rs.Weight)
	}
}

// schedulerFlags names the scheduler flags as ipvsadm does.
func schedulerFlags(vs *ipvs.VirtualServer) string {
	var names []string
	prefix := vs.Scheduler
	for _, f := range []struct {
		flag ipvs.Flags
		name string
	}{{ipvs.FlagSchedFlag1, "-fallback"}, {ipvs.FlagSchedFlag2, "-port"}} {
		if vs.Flags&f.flag != 0 {
			names = append(names, prefix+f.name)
		}
	}
	if vs.Flags&ipvs.FlagSchedFlag3 != 0 {
		names = append(names, "flag-3")
	}
	return strings.Join(names, ",")
}

func writeSet(b *strings.Builder, c *ipset.Contents) {
	fmt.Fprintf(b, "create %s %s", c.Set.Name, c.Set.Type)
	if c.Set.Type != ipset.BitmapPort {
		family := "inet"
		if c.Set.Family == v1.IPv6Protocol {
			family = "inet6"
		}
		b.WriteString(" family " + family)
	}
	// Upstream gives the comment to the iptables rules only, never to ipset.
	fmt.Fprintf(b, "  # %s\n", c.Set.Comment)
	for _, e := range c.Entries {
		fmt.Fprintf(b, "add %s %s\n", c.Set.Name, e)
	}
}
