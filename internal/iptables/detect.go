package iptables

import (
	"bytes"
	"context"
	"regexp"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// kubeletHintChains matches the declaration of the chains the kubelet
// creates in the mangle table of the backend it uses.
var kubeletHintChains = regexp.MustCompile(`(?m)^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)[ \t]`)

// DetectBackend decides which iptables backend the host uses, the way
// upstream kube-proxy's image does (kubernetes-sigs/iptables-wrappers):
//
//  1. iptables-nft-save -t mangle, then ip6tables-nft-save -t mangle: a
//     kubelet hint chain (KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY) means nft;
//  2. iptables-legacy-save, then ip6tables-legacy-save, of all tables (asking
//     legacy for "-t mangle" would make the kernel create that table): a hint
//     chain means legacy;
//  3. otherwise nft.
//
// Failures of the save commands (binary missing, no permission) only make
// that step find nothing. It never modifies the ruleset.
func DetectBackend(ctx context.Context, exec utilexec.Interface) Backend {
	probes := []struct {
		backend Backend
		family  v1.IPFamily
		args    []string
	}{
		{BackendNFT, v1.IPv4Protocol, []string{"-t", string(TableMangle)}},
		{BackendNFT, v1.IPv6Protocol, []string{"-t", string(TableMangle)}},
		{BackendLegacy, v1.IPv4Protocol, nil},
		{BackendLegacy, v1.IPv6Protocol, nil},
	}
	for _, p := range probes {
		if hasKubeletHint(ctx, exec, p.backend, p.family, p.args) {
			return p.backend
		}
	}
	return BackendNFT
}

func hasKubeletHint(ctx context.Context, exec utilexec.Interface, backend Backend, family v1.IPFamily, args []string) bool {
	name := "iptables-" + string(backend) + "-save"
	if family == v1.IPv6Protocol {
		name = "ip6tables-" + string(backend) + "-save"
	}
	if _, err := exec.LookPath(name); err != nil {
		return false
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SetStdout(&out)
	_ = cmd.Run() // best effort: a failure is "no hint here"
	return kubeletHintChains.Match(out.Bytes())
}
