package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Service is what the reconciler needs to know about one port of one Service in
// one IP family: its frontends and its serving endpoints.
type Service struct {
	// Protocol of the port; only UDP ports are reconciled, others are ignored.
	Protocol v1.Protocol
	// ClusterIP and Port are the cluster frontend. An invalid ClusterIP is skipped.
	ClusterIP netip.Addr
	Port      int32
	// NodePort is 0 when the Service has none.
	NodePort int32
	// ExternalIPs and LoadBalancerVIPs are further frontends on Port.
	ExternalIPs      []netip.Addr
	LoadBalancerVIPs []netip.Addr
	// ServingEndpoints are the endpoints whose "serving" condition is true
	// (including terminating ones), irrespective of traffic policies and topology:
	// a change to the Service must not break existing flows, as for TCP.
	ServingEndpoints []netip.AddrPort
}

// StaleFlows returns the UDP flows among entries that were sent to a frontend of one
// of the services (by original destination IP:port, or by original destination port
// for NodePorts) and whose reply source (the DNAT target) is not a serving endpoint
// of that service.
//
// A Service without serving endpoints still has its IP frontends reconciled (every
// flow to them is stale): the reject rule for a Service without endpoints matches
// the Service IP, and cannot catch flows already DNATed to a deleted endpoint, which
// one-way UDP senders keep alive forever. Its NodePort is left alone, though: a
// NodePort is matched on the destination port only, and an empty endpoint set would
// delete unrelated flows to any host on that port.
func StaleFlows(entries []*netlink.ConntrackFlow, services []Service) []*netlink.ConntrackFlow {
	byFrontend := map[netip.AddrPort]map[netip.AddrPort]bool{}
	byNodePort := map[uint16]map[netip.AddrPort]bool{}

	for i := range services {
		svc := &services[i]
		if svc.Protocol != v1.ProtocolUDP {
			continue
		}
		serving := make(map[netip.AddrPort]bool, len(svc.ServingEndpoints))
		for _, ep := range svc.ServingEndpoints {
			serving[unmapAddrPort(ep)] = true
		}
		port := uint16(svc.Port)
		addFrontend := func(ip netip.Addr) {
			if ip.IsValid() {
				byFrontend[netip.AddrPortFrom(ip.Unmap(), port)] = serving
			}
		}
		addFrontend(svc.ClusterIP)
		for _, ip := range svc.LoadBalancerVIPs {
			addFrontend(ip)
		}
		for _, ip := range svc.ExternalIPs {
			addFrontend(ip)
		}
		if svc.NodePort != 0 && len(serving) > 0 {
			byNodePort[uint16(svc.NodePort)] = serving
		}
	}

	var stale []*netlink.ConntrackFlow
	for _, flow := range entries {
		if flow.Forward.Protocol != unix.IPPROTO_UDP {
			continue
		}
		origDst, ok := addrPort(flow.Forward.DstIP, flow.Forward.DstPort)
		if !ok {
			continue
		}
		replySrc, _ := addrPort(flow.Reverse.SrcIP, flow.Reverse.SrcPort)

		if serving, ok := byFrontend[origDst]; ok && !serving[replySrc] {
			stale = append(stale, flow)
			continue
		}
		if serving, ok := byNodePort[flow.Forward.DstPort]; ok && !serving[replySrc] {
			stale = append(stale, flow)
		}
	}
	return stale
}

func addrPort(ip net.IP, port uint16) (netip.AddrPort, bool) {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr.Unmap(), port), true
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// CleanStaleEntries lists the conntrack table of the family, deletes the flows
// StaleFlows selects for the services, and returns how many entries were deleted
// (the increment of conntrack_reconciler_deleted_entries_total). A listing cut short
// by EINTR is reconciled with what was received.
func CleanStaleEntries(ctx context.Context, ct Interface, family v1.IPFamily, services []Service) (int, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	logger.V(4).Info("Started to reconcile conntrack entries", "ipFamily", family)

	entries, err := ct.ListEntries(family)
	if err != nil {
		if !errors.Is(err, unix.EINTR) {
			return 0, fmt.Errorf("reconciling conntrack entries: %w", err)
		}
		logger.V(2).Info("Received a partial conntrack listing, continuing with it", "ipFamily", family, "err", err)
	}

	n, err := ct.DeleteEntries(family, StaleFlows(entries, services))
	if err != nil {
		return n, fmt.Errorf("reconciling conntrack entries: %w", err)
	}
	logger.V(4).Info("Finished reconciling conntrack entries", "ipFamily", family, "entriesDeleted", n, "took", time.Since(start))
	return n, nil
}
