package app

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/config"
	"github.com/kproxy/kproxy/internal/node"
)

func TestCheckNFTablesKernel(t *testing.T) {
	tests := []struct {
		name    string
		release string
		readErr error
		skip    string
		wantErr string
	}{
		{name: "6.18 is new enough", release: "6.18.44-fc-v657\n"},
		{name: "5.13 exactly", release: "5.13.0"},
		{name: "5.10 refused", release: "5.10.0-28-amd64", wantErr: "kube-proxy in nftables mode requires kernel 5.13 or later"},
		{name: "5.10 with the skip variable", release: "5.10.0", skip: "1"},
		{name: "unreadable", readErr: fs.ErrPermission, wantErr: "could not check kernel version"},
		{name: "unparsable", release: "garbage", wantErr: "failed to parse kernel version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(name string) string {
				if name == nftablesSkipKernelCheckEnv {
					return tc.skip
				}
				return ""
			}
			readFile := func(path string) ([]byte, error) {
				if path != kernelReleaseFile {
					t.Errorf("read %s, want %s", path, kernelReleaseFile)
				}
				return []byte(tc.release), tc.readErr
			}
			err := checkNFTablesKernel(getenv, readFile)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want it to contain %q", err, tc.wantErr)
			}
			if tc.readErr != nil && !errors.Is(err, tc.readErr) {
				t.Errorf("error %v does not wrap %v", err, tc.readErr)
			}
		})
	}
}

func TestIPTablesFamilies(t *testing.T) {
	tests := []struct {
		name    string
		v4, v6  bool
		want    node.Families
		wantErr bool
	}{
		{name: "both", v4: true, v6: true, want: node.Families{IPv4: true, IPv6: true}},
		{name: "no ip6tables: single-stack IPv4, as upstream", v4: true, want: node.Families{IPv4: true}},
		{name: "no iptables: single-stack IPv6", v6: true, want: node.Families{IPv6: true}},
		{name: "neither: the start fails", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := iptablesFamilies(context.Background(), func(f v1.IPFamily) bool {
				return map[v1.IPFamily]bool{v1.IPv4Protocol: tc.v4, v1.IPv6Protocol: tc.v6}[f]
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("families = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNFTablesWriterKind(t *testing.T) {
	tests := []struct {
		env     string
		gate    bool
		want    string
		wantErr bool
	}{
		{env: "", gate: true, want: "netlink"},
		{env: "", gate: false, want: "nft"},
		{env: "nft", gate: true, want: "nft"},
		{env: "netlink", gate: false, want: "netlink"},
		{env: "bogus", gate: true, wantErr: true},
	}
	for _, tc := range tests {
		got, err := nftablesWriterKind(tc.env, tc.gate)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("nftablesWriterKind(%q, %v) = %q, %v; want %q (error %v)", tc.env, tc.gate, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestZPagesFollowTheirGates(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		fg, err := config.NewFeatureGate()
		if err != nil {
			t.Fatal(err)
		}
		if err := fg.SetFromMap(map[string]bool{"ComponentFlagz": enabled}); err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{FeatureGates: fg, Flags: map[string]string{"v": "2"}}
		if got := flagzIfEnabled(cfg) != nil; got != enabled {
			t.Errorf("ComponentFlagz=%v: /flagz served = %v", enabled, got)
		}
	}
}
