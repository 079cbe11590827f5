package lab

import (
	"os/exec"

	v1 "k8s.io/api/core/v1"
)

// IPTablesCommand returns the iptables tool ("", "-save" or "-restore") of fam that
// proxies use in the lab's namespaces: the nft backend, which kproxy and upstream
// detect on a node without the kubelet's hint chains, and which the plain commands
// point at on the lab's hosts (the plain name where iptables-nft is not installed).
func IPTablesCommand(fam v1.IPFamily, tool string) string {
	base := "iptables"
	if fam == v1.IPv6Protocol {
		base = "ip6tables"
	}
	if _, err := exec.LookPath(base + "-nft" + tool); err == nil {
		return base + "-nft" + tool
	}
	return base + tool
}
