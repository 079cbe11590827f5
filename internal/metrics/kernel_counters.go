package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// nfacct counter names that the iptables proxier creates, as upstream.
const (
	IPTablesCTStateInvalidDroppedNFAcctCounter = "ct_state_invalid_dropped_pkts"
	LocalhostNodePortAcceptedNFAcctCounter     = "localhost_nps_accepted_pkts"
)

// NFAcctReader returns the packet count of the named nfacct counter.
type NFAcctReader func(ctx context.Context, name string) (packets uint64, err error)

// NFTablesCounterLister returns the packet counts of the named counters in the
// kube-proxy table of family, keyed by counter name. found is false when the table
// does not exist (not an error: the proxier has not created it yet).
type NFTablesCounterLister func(ctx context.Context, family v1.IPFamily) (packets map[string]uint64, found bool, err error)

// LocalhostNodePortRejectableProtocols are the NodePort protocols whose localhost
// traffic may be rejected and counted: UDP and SCTP always, TCP when the localhost
// NodePort proxy is not running.
var LocalhostNodePortRejectableProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

// LocalhostNodePortRejectedCounterName is the name of the nftables counter the
// kube-proxy table increments for localhost NodePort packets of protocol that are
// rejected.
func LocalhostNodePortRejectedCounterName(protocol v1.Protocol) string {
	return "localhost-nodeport-rejected-" + strings.ToLower(string(protocol))
}

var (
	ctStateInvalidDroppedDesc = prometheus.NewDesc(
		"kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
		alpha("packets dropped by iptables to work around conntrack problems"), nil, nil)
	localhostNodePortsAcceptedDesc = prometheus.NewDesc(
		"kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
		alpha("Number of packets accepted on nodeports of loopback interface"), nil, nil)
	localhostNodePortRejectedDesc = prometheus.NewDesc(
		"kubeproxy_nftables_localhost_nodeport_rejected_packets_total",
		alpha("Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running"),
		[]string{"ip_family", "protocol"}, nil)
)

// counterReadTimeout bounds one scrape's kernel reads, as upstream's 2s.
const counterReadTimeout = 2 * time.Second

type nfacctCollector struct {
	read    NFAcctReader
	counter string
	desc    *prometheus.Desc
}

func newNFAcctCollector(read NFAcctReader, counter string, desc *prometheus.Desc) *nfacctCollector {
	return &nfacctCollector{read: read, counter: counter, desc: desc}
}

func (c *nfacctCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect omits the sample when the read fails; the failure surfaces in the
// collector's absence of data rather than failing the whole scrape.
func (c *nfacctCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), counterReadTimeout)
	defer cancel()
	packets, err := c.read(ctx, c.counter)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(packets))
}

type nftablesRejectCollector struct {
	list      NFTablesCounterLister
	protocols map[string]string // counter name -> protocol label
}

func newNFTablesRejectCollector(list NFTablesCounterLister) *nftablesRejectCollector {
	protocols := make(map[string]string, len(LocalhostNodePortRejectableProtocols))
	for _, p := range LocalhostNodePortRejectableProtocols {
		protocols[LocalhostNodePortRejectedCounterName(p)] = string(p)
	}
	return &nftablesRejectCollector{list: list, protocols: protocols}
}

func (c *nftablesRejectCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- localhostNodePortRejectedDesc
}

func (c *nftablesRejectCollector) Collect(ch chan<- prometheus.Metric) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		ctx, cancel := context.WithTimeout(context.Background(), counterReadTimeout)
		counters, found, err := c.list(ctx, family)
		cancel()
		if err != nil || !found {
			continue
		}
		for name, packets := range counters {
			protocol, ok := c.protocols[name]
			if !ok {
				continue
			}
			ch <- prometheus.MustNewConstMetric(localhostNodePortRejectedDesc, prometheus.CounterValue,
				float64(packets), string(family), protocol)
		}
	}
}
