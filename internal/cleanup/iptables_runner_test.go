package cleanup

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const hintDump = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
const canaryDump = "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"
const noHintDump = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINTS-NOT - [0:0]\nCOMMIT\n"

func allInstalled() map[string]bool {
	m := map[string]bool{}
	for _, b := range []string{"iptables", "ip6tables"} {
		for _, v := range []string{"", "-nft", "-legacy"} {
			for _, tool := range []string{"", "-save", "-restore"} {
				m[b+v+tool] = true
			}
		}
	}
	return m
}

func TestDetectIPTablesBackend(t *testing.T) {
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
			if got := DetectIPTablesBackend(context.Background(), exec); got != tc.want {
				t.Errorf("DetectIPTablesBackend = %q, want %q (calls %q)", got, tc.want, exec.Calls())
			}
			for _, c := range exec.Calls() {
				if strings.HasPrefix(c, "iptables-legacy-save -t") || strings.HasPrefix(c, "ip6tables-legacy-save -t") {
					t.Errorf("legacy save must not name a table (it would create it): %q", c)
				}
			}
		})
	}
}

func TestExecIPTablesCommandLines(t *testing.T) {
	ctx := context.Background()
	jump := []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
	cases := []struct {
		name      string
		family    IPFamily
		backend   Backend
		installed map[string]bool
		results   map[string]scriptResult
		run       func(r *ExecIPTables) error
		want      []string
	}{
		{
			name: "delete present rule then stop when absent", family: IPv4, backend: BackendNFT, installed: allInstalled(),
			results: map[string]scriptResult{
				"iptables-nft -w 5 -C PREROUTING -t nat -m comment --comment kubernetes service portals -j KUBE-SERVICES": {},
				"iptables-nft -w 5 -D PREROUTING -t nat -m comment --comment kubernetes service portals -j KUBE-SERVICES": {},
			},
			run: func(r *ExecIPTables) error {
				// The scripted -C keeps succeeding, so the loop is bounded.
				return r.DeleteRule(ctx, tableNAT, "PREROUTING", jump...)
			},
		},
		{
			name: "absent rule is not an error", family: IPv6, backend: BackendLegacy, installed: allInstalled(),
			run:  func(r *ExecIPTables) error { return r.DeleteRule(ctx, tableNAT, "PREROUTING", jump...) },
			want: []string{"ip6tables-legacy -w 5 -C PREROUTING -t nat -m comment --comment kubernetes service portals -j KUBE-SERVICES"},
		},
		{
			name: "missing target chain is not an error", family: IPv4, backend: BackendLegacy, installed: allInstalled(),
			results: map[string]scriptResult{
				"iptables-legacy -w 5 -C PREROUTING -t nat -m comment --comment kubernetes service portals -j KUBE-SERVICES": {
					stdout: "iptables v1.8.9 (legacy): Couldn't load target `KUBE-SERVICES':No such file or directory", status: 2},
			},
			run:  func(r *ExecIPTables) error { return r.DeleteRule(ctx, tableNAT, "PREROUTING", jump...) },
			want: []string{"iptables-legacy -w 5 -C PREROUTING -t nat -m comment --comment kubernetes service portals -j KUBE-SERVICES"},
		},
		{
			name: "restore falls back to plain binary", family: IPv4, backend: BackendNFT, installed: map[string]bool{"iptables-restore": true},
			results: map[string]scriptResult{"iptables-restore -w 5 -T nat --noflush --counters": {}},
			run:     func(r *ExecIPTables) error { return r.Restore(ctx, tableNAT, []byte("*nat\nCOMMIT\n")) },
			want:    []string{"iptables-restore -w 5 -T nat --noflush --counters"},
		},
		{
			name: "save and delete chain", family: IPv6, backend: BackendPlain, installed: allInstalled(),
			results: map[string]scriptResult{"ip6tables-save -t filter": {stdout: "*filter\nCOMMIT\n"}},
			run: func(r *ExecIPTables) error {
				if _, err := r.Save(ctx, tableFilter); err != nil {
					return err
				}
				return r.DeleteChain(ctx, tableMangle, mangleCanaryChain) // exit 1, no "not found" text: error
			},
			want: []string{"ip6tables-save -t filter", "ip6tables -w 5 -X KUBE-PROXY-CANARY -t mangle"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exec := &scriptExec{installed: tc.installed, results: tc.results}
			r := NewExecIPTables(exec, tc.family, tc.backend)
			err := tc.run(r)
			calls := exec.Calls()
			switch tc.name {
			case "delete present rule then stop when absent":
				if err == nil || len(calls) != 2*maxRuleCopies {
					t.Errorf("err=%v after %d calls; want a bounded failure after %d", err, len(calls), 2*maxRuleCopies)
				}
				return
			case "save and delete chain":
				if err == nil {
					t.Error("a failure without a not-found message must be reported")
				}
			default:
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
			}
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
		})
	}
}
