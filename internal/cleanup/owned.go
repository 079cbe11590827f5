package cleanup

import (
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/iptables"
)

// Names that upstream kube-proxy v1.37 owns. These lists are the whole
// definition of "ours": nothing outside them is ever removed.

// nftablesTable is the single table the nftables proxier creates per family.
const nftablesTable = "kube-proxy"

// nftablesFamilies are the families the nftables proxier uses (no inet table).
var nftablesFamilies = []knftables.Family{knftables.IPv4Family, knftables.IPv6Family}

// iptables table names.
const (
	tableNAT    = iptables.TableNAT
	tableFilter = iptables.TableFilter
	tableMangle = iptables.TableMangle
)

// jumpRule is a rule in a built-in chain that jumps into one of our chains.
// It is deleted by exact match, so match order and comment must be as the
// proxier installed them.
type jumpRule struct {
	table   iptables.Table
	from    iptables.Chain
	to      iptables.Chain
	comment string
	// match holds the match arguments placed before the comment match.
	match []string
}

// args returns the rule specification after "-t table -A from".
func (j jumpRule) args() []string {
	args := append([]string{}, j.match...)
	return append(args, "-m", "comment", "--comment", j.comment, "-j", string(j.to))
}

var ctstateNew = []string{"-m", "conntrack", "--ctstate", "NEW"}

// iptablesModeJumps are the iptables proxier's jumps (upstream
// iptablesJumpChains; its cleanup-only list is empty in v1.37). The kubelet's
// KUBE-FIREWALL jumps, which the proxier duplicates, are deliberately absent.
var iptablesModeJumps = []jumpRule{
	{tableFilter, "INPUT", "KUBE-EXTERNAL-SERVICES", "kubernetes externally-visible service portals", ctstateNew},
	{tableFilter, "FORWARD", "KUBE-EXTERNAL-SERVICES", "kubernetes externally-visible service portals", ctstateNew},
	{tableFilter, "INPUT", "KUBE-NODEPORTS", "kubernetes health check service ports", nil},
	{tableFilter, "FORWARD", "KUBE-SERVICES", "kubernetes service portals", ctstateNew},
	{tableFilter, "OUTPUT", "KUBE-SERVICES", "kubernetes service portals", ctstateNew},
	{tableFilter, "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules", nil},
	{tableFilter, "INPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", ctstateNew},
	{tableFilter, "OUTPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", ctstateNew},
	{tableFilter, "FORWARD", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", ctstateNew},
	{tableNAT, "OUTPUT", "KUBE-SERVICES", "kubernetes service portals", nil},
	{tableNAT, "PREROUTING", "KUBE-SERVICES", "kubernetes service portals", nil},
	{tableNAT, "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules", nil},
}

// ipvsModeJumps are the ipvs proxier's jumps (upstream iptablesJumpChain in
// pkg/proxy/ipvs); none has extra matches.
var ipvsModeJumps = []jumpRule{
	{tableNAT, "OUTPUT", "KUBE-SERVICES", "kubernetes service portals", nil},
	{tableNAT, "PREROUTING", "KUBE-SERVICES", "kubernetes service portals", nil},
	{tableNAT, "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules", nil},
	{tableFilter, "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules", nil},
	{tableFilter, "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules", nil},
	{tableFilter, "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules", nil},
	{tableFilter, "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules", nil},
	{tableFilter, "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter", nil},
	{tableFilter, "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter", nil},
}

// ownedJumps is every jump rule removed, iptables mode first (upstream order),
// without duplicates.
func ownedJumps() []jumpRule {
	seen := map[string]bool{}
	var out []jumpRule
	for _, j := range append(append([]jumpRule{}, iptablesModeJumps...), ipvsModeJumps...) {
		key := string(j.table) + " " + string(j.from) + " " + strings.Join(j.args(), " ")
		if !seen[key] {
			seen[key] = true
			out = append(out, j)
		}
	}
	return out
}

// fixedChains are the chains removed per table when present: the iptables
// proxier's first (upstream order), then the ipvs proxier's that it lacks.
var fixedChains = map[iptables.Table][]iptables.Chain{
	tableNAT: {
		// iptables proxier
		"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-PROXY-CANARY",
		// ipvs proxier
		"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER",
	},
	tableFilter: {
		// iptables proxier
		"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY",
		// ipvs proxier
		"KUBE-NODE-PORT", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER",
	},
}

// mangleCanaryChain is the iptables proxier's only mangle chain.
const mangleCanaryChain = iptables.CanaryChain

// ipvsDummyLink is the dummy interface the ipvs proxier binds service IPs to.
const ipvsDummyLink = "kube-ipvs0"

// ipvsIPSets are the ipvs proxier's IPv4 ipset names.
var ipvsIPSets = []string{
	"KUBE-LOOP-BACK",
	"KUBE-CLUSTER-IP",
	"KUBE-EXTERNAL-IP",
	"KUBE-EXTERNAL-IP-LOCAL",
	"KUBE-LOAD-BALANCER",
	"KUBE-LOAD-BALANCER-FW",
	"KUBE-LOAD-BALANCER-LOCAL",
	"KUBE-LOAD-BALANCER-SOURCE-IP",
	"KUBE-LOAD-BALANCER-SOURCE-CIDR",
	"KUBE-NODE-PORT-TCP",
	"KUBE-NODE-PORT-LOCAL-TCP",
	"KUBE-NODE-PORT-UDP",
	"KUBE-NODE-PORT-LOCAL-UDP",
	"KUBE-NODE-PORT-SCTP-HASH",
	"KUBE-NODE-PORT-LOCAL-SCTP-HASH",
	"KUBE-HEALTH-CHECK-NODE-PORT",
	"KUBE-IPVS-IPS",
}

// maxIPSetNameLen is the kernel's limit (IPSET_MAXNAMELEN - 1).
const maxIPSetNameLen = 31

// ownedIPSets returns the IPv4 names followed by their IPv6 twins, which the
// ipvs proxier names by replacing "KUBE-" with "KUBE-6-" and truncating.
func ownedIPSets() []string {
	out := append([]string{}, ipvsIPSets...)
	for _, name := range ipvsIPSets {
		v6 := "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
		if len(v6) > maxIPSetNameLen {
			v6 = v6[:maxIPSetNameLen]
		}
		out = append(out, v6)
	}
	return out
}
