package iptables

import (
	"context"
	"strings"
	"testing"
)

const (
	hintDump   = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
	canaryDump = "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"
	noHintDump = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINTS-NOT - [0:0]\nCOMMIT\n"
)

func TestDetectBackend(t *testing.T) {
	cases := []struct {
		name      string
		installed map[string]bool
		results   map[string]scriptResult
		want      Backend
	}{
		{"no hint anywhere defaults to nft", allInstalled(), nil, BackendNFT},
		{"hint in nft", allInstalled(), map[string]scriptResult{
			"iptables-nft-save -t mangle": {stdout: hintDump},
			"iptables-legacy-save":        {stdout: hintDump},
		}, BackendNFT},
		{"canary in nft ip6 only", allInstalled(), map[string]scriptResult{
			"ip6tables-nft-save -t mangle": {stdout: canaryDump},
		}, BackendNFT},
		{"hint in legacy", allInstalled(), map[string]scriptResult{
			"iptables-nft-save -t mangle": {stdout: noHintDump},
			"iptables-legacy-save":        {stdout: hintDump},
		}, BackendLegacy},
		{"hint in legacy ip6 only", allInstalled(), map[string]scriptResult{
			"ip6tables-legacy-save": {stdout: canaryDump},
		}, BackendLegacy},
		{"nft binaries missing", map[string]bool{"iptables-legacy-save": true}, map[string]scriptResult{
			"iptables-nft-save -t mangle": {stdout: hintDump},
			"iptables-legacy-save":        {stdout: hintDump},
		}, BackendLegacy},
		{"failing saves find nothing", allInstalled(), map[string]scriptResult{
			"iptables-nft-save -t mangle": {status: 4},
			"iptables-legacy-save":        {status: 1},
		}, BackendNFT},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exec := &scriptExec{installed: tc.installed, results: tc.results}
			if got := DetectBackend(context.Background(), exec); got != tc.want {
				t.Errorf("DetectBackend = %q, want %q (calls %q)", got, tc.want, exec.Calls())
			}
			for _, c := range exec.Calls() {
				if strings.HasPrefix(c, "iptables-legacy-save -t") || strings.HasPrefix(c, "ip6tables-legacy-save -t") {
					t.Errorf("legacy save must not name a table (it would create it): %q", c)
				}
			}
		})
	}
}
