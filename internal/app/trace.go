package app

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/inspect"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/live"
)

// defaultSourcePort is the source port of a traced packet when --src has none.
const defaultSourcePort = 40000

// stateGetter reads the state API (inspect.Client; a fake in tests).
type stateGetter interface {
	Get(ctx context.Context, path string, query url.Values, v any) error
}

// traceRequest is what `kube-proxy trace` was asked.
type traceRequest struct {
	src, dst, iif string
}

// packet reads the request into the packet to trace and its description.
func (r *traceRequest) packet() (trace.Packet, inspect.TracePacket, error) {
	var p trace.Packet
	dst, proto, err := parseDestination(r.dst)
	if err != nil {
		return p, inspect.TracePacket{}, err
	}
	src, err := parseSource(r.src)
	if err != nil {
		return p, inspect.TracePacket{}, err
	}
	if src.Addr().Is4() != dst.Addr().Is4() {
		return p, inspect.TracePacket{}, fmt.Errorf("--src %s and --dst %s are of different IP families", src.Addr(), dst.Addr())
	}
	p = trace.Packet{
		SourceIP: src.Addr().String(), SourcePort: int(src.Port()),
		DestIP: dst.Addr().String(), DestPort: int(dst.Port()),
		Protocol: proto, InputInterface: r.iif, LocallyGenerated: r.iif == "", CTState: "new",
	}
	desc := inspect.TracePacket{
		Family: string(familyOf(dst.Addr())), Protocol: proto, Source: src.String(), Destination: dst.String(),
		InputInterface: r.iif, LocallyGenerated: r.iif == "", CTState: p.CTState,
	}
	return p, desc, nil
}

// parseDestination reads IP:PORT[/tcp|udp|sctp].
func parseDestination(s string) (netip.AddrPort, string, error) {
	addr, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = "tcp"
	}
	proto = strings.ToLower(proto)
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return netip.AddrPort{}, "", fmt.Errorf("--dst %q: protocol %q is not tcp, udp or sctp", s, proto)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("--dst %q: want IP:PORT[/tcp|udp|sctp] (IPv6 as [IP]:PORT): %w", s, err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), proto, nil
}

// parseSource reads IP or IP:PORT ([IP]:PORT for IPv6).
func parseSource(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), defaultSourcePort), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("--src %q: want IP or IP:PORT (IPv6 as [IP]:PORT): %w", s, err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

func familyOf(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// runTrace composes the parts of `kube-proxy trace`: the proxy's mode from the
// state API, the live ruleset of the packet's family through reader, its
// evaluation, and the model's view of the destination.
func runTrace(ctx context.Context, state stateGetter, reader live.Reader, req traceRequest) (*inspect.Trace, error) {
	pkt, desc, err := req.packet()
	if err != nil {
		return nil, err
	}
	var node inspect.Node
	if err := state.Get(ctx, "node", nil, &node); err != nil {
		return nil, err
	}
	loaded, err := live.Load(ctx, reader, node.Mode, v1.IPFamily(desc.Family))
	if err != nil {
		return nil, err
	}
	res, err := loaded.Trace(pkt)
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", loaded.Ruleset, err)
	}
	q := url.Values{"ip": {pkt.DestIP}, "port": {strconv.Itoa(pkt.DestPort)}, "protocol": {pkt.Protocol}}
	var dest inspect.Lookup
	if err := state.Get(ctx, "lookup", q, &dest); err != nil {
		return nil, err
	}
	return inspect.BuildTrace(node.NodeName, node.Mode, loaded.Ruleset, desc, res, &dest), nil
}

func newTraceCommand() *cobra.Command {
	var opts toolOptions
	var req traceRequest
	cmd := &cobra.Command{
		Use:   "trace --src IP[:PORT] --dst IP:PORT[/tcp|udp|sctp] [--iif NAME]",
		Short: "Evaluate a packet against this node's live kernel ruleset: path, verdict, DNAT targets, masquerade, and the model's reasons",
		Long: `Evaluate a packet against the ruleset the kernel of this node holds now (nftables
table kube-proxy, or the iptables filter and nat tables, with the ipsets and the IPVS
virtual servers in ipvs mode, of the packet's family),
and print its path: the hooks and chains it enters, the rules it matches, and each
possible outcome (DROP, REJECT, or DNAT to an endpoint with its probability,
masqueraded or not), joined with what the proxy's model says about the destination:
which Service port it is, and why each endpoint is or is not used.

The packet is new (ct state new), TCP unless --dst says otherwise, from source port
40000 unless --src gives one. Without --iif it is generated on the node itself (by a
host-network process); with --iif it arrives on that interface (from a pod's veth or
bridge, or from outside the node).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.src == "" || req.dst == "" {
				return fmt.Errorf("--src and --dst are required")
			}
			t, err := runTrace(cmd.Context(), opts.client(), &live.Kernel{}, req)
			if err != nil {
				return err
			}
			return opts.print(cmd.OutOrStdout(), t, func() error { return inspect.PrintTrace(cmd.OutOrStdout(), t) })
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringVar(&req.src, "src", "", "the packet's source, IP or IP:PORT ([IP]:PORT for IPv6; port 40000 by default)")
	cmd.Flags().StringVar(&req.dst, "dst", "", "the packet's destination, IP:PORT[/tcp|udp|sctp] (tcp by default)")
	cmd.Flags().StringVar(&req.iif, "iif", "", "the interface the packet arrives on; empty: generated on the node itself")
	return cmd
}
