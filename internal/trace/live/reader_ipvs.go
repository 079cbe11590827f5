package live

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// IPSets implements Reader with `ipset save` (internal/ipset's Exec).
func (k *Kernel) IPSets(ctx context.Context) ([]ipset.SavedSet, error) {
	sets, err := ipset.New(k.Exec).SaveSets(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the ipsets: %w", err)
	}
	return sets, nil
}

// IPVS implements Reader over generic netlink (internal/ipvs, read only),
// /proc/net/ip_vs_conn (the persistence templates) and IPVS's conntrack sysctl.
func (k *Kernel) IPVS(_ context.Context, family v1.IPFamily) (ipvstrace.IPVS, error) {
	h := ipvs.New("")
	defer func() { _ = h.Close() }()
	vss, err := h.VirtualServers()
	if errors.Is(err, ipvs.ErrUnavailable) {
		return ipvstrace.IPVS{}, fmt.Errorf("the kernel has no IPVS (is the proxy running in ipvs mode on this node?): %w", err)
	}
	if err != nil {
		return ipvstrace.IPVS{}, err
	}
	var out ipvstrace.IPVS
	for _, vs := range vss {
		if vs.Address.Is4() != (family == v1.IPv4Protocol) {
			continue
		}
		reals, err := h.RealServers(vs.Key())
		if err != nil {
			return ipvstrace.IPVS{}, err
		}
		out.Services = append(out.Services, ipvstrace.Service{VS: vs, Reals: reals})
	}
	b, err := os.ReadFile(ipvsConnFile)
	if err != nil {
		return ipvstrace.IPVS{}, fmt.Errorf("reading the IPVS connections: %w", err)
	}
	out.Templates = parseTemplates(string(b), family)
	// One sysctl for both families (net.ipv4.vs.conntrack).
	ct, err := os.ReadFile(ipvsConntrackFile)
	if err != nil {
		return ipvstrace.IPVS{}, fmt.Errorf("reading IPVS's conntrack setting: %w", err)
	}
	out.NoConntrack = strings.TrimSpace(string(ct)) == "0"
	return out, nil
}

// ipvsConntrackFile is IPVS's conntrack sysctl: 1 (kube-proxy's setting) keeps
// its packets in conntrack, so that nat can masquerade them.
const ipvsConntrackFile = "/proc/sys/net/ipv4/vs/conntrack"

// ipvsConnFile lists IPVS's connections, persistence templates included, for the
// reader's network namespace.
const ipvsConnFile = "/proc/net/ip_vs_conn"

// parseTemplates reads the persistence templates of family in /proc/net/ip_vs_conn:
// "Pro FromIP FPrt ToIP TPrt DestIP DPrt State Expires ..." with IPv4 addresses
// and ports in hex ("0A000002 0050"), IPv6 addresses written out. A template is
// the entry without a client port (ipvsadm -Lc shows its state as NONE).
func parseTemplates(text string, family v1.IPFamily) []ipvstrace.Template {
	var out []ipvstrace.Template
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[2] != "0000" {
			continue
		}
		proto, ok := map[string]v1.Protocol{"TCP": v1.ProtocolTCP, "UDP": v1.ProtocolUDP, "SCTP": v1.ProtocolSCTP}[f[0]]
		if !ok {
			continue
		}
		client, ok1 := procAddr(f[1])
		vaddr, ok2 := procAddr(f[3])
		daddr, ok3 := procAddr(f[5])
		vport, err1 := strconv.ParseUint(f[4], 16, 16)
		dport, err2 := strconv.ParseUint(f[6], 16, 16)
		if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil || client.Is4() != (family == v1.IPv4Protocol) {
			continue
		}
		out = append(out, ipvstrace.Template{
			Client: client,
			VS:     ipvs.Key{Address: vaddr, Protocol: proto, Port: uint16(vport)},
			Real:   netip.AddrPortFrom(daddr, uint16(dport)),
		})
	}
	return out
}

// procAddr reads an address of /proc/net/ip_vs_conn: IPv4 as 8 hex digits, IPv6
// as text.
func procAddr(s string) (netip.Addr, bool) {
	if len(s) == 8 && !strings.Contains(s, ":") {
		n, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err == nil
}

// Bridged implements Reader: the bridges of the namespace when br_netfilter
// shows bridged packets to the family's iptables (bridge-nf-call-iptables or
// -ip6tables is 1).
func (k *Kernel) Bridged(_ context.Context, family v1.IPFamily) ([]string, error) {
	name := "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if family == v1.IPv6Protocol {
		name = "/proc/sys/net/bridge/bridge-nf-call-ip6tables"
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // br_netfilter not loaded
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if strings.TrimSpace(string(b)) != "1" {
		return nil, nil
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing the node's interfaces: %w", err)
	}
	var out []string
	for _, l := range links {
		if l.Type() == "bridge" {
			out = append(out, l.Attrs().Name)
		}
	}
	return out, nil
}
