package conntrack

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kproxy/kproxy/internal/sysctl"
)

func TestConntrackMax(t *testing.T) {
	tests := []struct {
		name   string
		cfg    SysctlConfig
		numCPU int
		want   int
	}{
		{"unset leaves it alone", SysctlConfig{Min: 131072}, 8, 0},
		{"scaled above min", SysctlConfig{MaxPerCore: 32768, Min: 131072}, 8, 262144},
		{"min wins", SysctlConfig{MaxPerCore: 32768, Min: 131072}, 2, 131072},
		{"no min", SysctlConfig{MaxPerCore: 32768}, 2, 65536},
		{"capped at 1M", SysctlConfig{MaxPerCore: 32768, Min: 131072}, 64, 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConntrackMax(tc.cfg, tc.numCPU); got != tc.want {
				t.Errorf("ConntrackMax = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestApplySysctls(t *testing.T) {
	const (
		max         = "net/netfilter/nf_conntrack_max"
		established = "net/netfilter/nf_conntrack_tcp_timeout_established"
		closeWait   = "net/netfilter/nf_conntrack_tcp_timeout_close_wait"
		liberal     = "net/netfilter/nf_conntrack_tcp_be_liberal"
		udpTimeout  = "net/netfilter/nf_conntrack_udp_timeout"
		udpStream   = "net/netfilter/nf_conntrack_udp_timeout_stream"
	)
	full := SysctlConfig{
		MaxPerCore:            32768,
		Min:                   131072,
		TCPEstablishedTimeout: 24 * time.Hour,
		TCPCloseWaitTimeout:   time.Hour,
		TCPBeLiberal:          true,
		UDPTimeout:            30 * time.Second,
		UDPStreamTimeout:      120 * time.Second,
	}
	defaults := func() map[string]int {
		return map[string]int{
			max: 65536, established: 432000, closeWait: 60, liberal: 0, udpTimeout: 30, udpStream: 120,
		}
	}
	tests := []struct {
		name         string
		cfg          SysctlConfig
		values       map[string]int
		hashsize     int
		readOnly     bool
		hashsizeErr  error
		wantWrites   []string
		wantHashsize []int
		wantErr      bool
	}{
		{
			name:     "everything set, unchanged values not rewritten",
			cfg:      full,
			values:   defaults(),
			hashsize: 16384,
			wantWrites: []string{
				max + "=262144",
				established + "=86400",
				closeWait + "=3600",
				liberal + "=1",
			},
			wantHashsize: []int{65536},
		},
		{
			name: "max is only raised; hashsize only raised",
			cfg:  SysctlConfig{MaxPerCore: 32768, Min: 131072},
			values: func() map[string]int {
				v := defaults()
				v[max] = 1 << 20
				return v
			}(),
			hashsize: 1 << 18,
		},
		{
			name:     "maxPerCore 0 leaves max and hashsize alone",
			cfg:      SysctlConfig{Min: 131072, UDPTimeout: 60 * time.Second},
			values:   defaults(),
			hashsize: 1,
			wantWrites: []string{
				udpTimeout + "=60",
			},
		},
		{
			name:     "unreadable max is written anyway",
			cfg:      SysctlConfig{MaxPerCore: 32768},
			values:   map[string]int{},
			hashsize: 1 << 20,
			wantWrites: []string{
				max + "=262144",
			},
		},
		{
			name:        "read-only /proc/sys: the first failure stops it, as upstream",
			cfg:         full,
			values:      defaults(),
			readOnly:    true,
			hashsize:    16384,
			hashsizeErr: fs.ErrPermission,
			wantErr:     true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := sysctl.NewFake(tc.values)
			if tc.readOnly {
				sys.SetReadOnly()
			}
			hs := &sysctl.FakeModuleParam{Value: tc.hashsize, SetErr: tc.hashsizeErr}
			env := SysctlEnv{Sysctl: sys, Hashsize: hs, NumCPU: func() int { return 8 }}
			err := ApplySysctls(context.Background(), env, tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ApplySysctls error = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, sys.Writes()); diff != "" {
				t.Errorf("sysctl writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHashsize, hs.Written); diff != "" {
				t.Errorf("hashsize writes (-want +got):\n%s", diff)
			}
			if tc.readOnly {
				// nf_conntrack_max fails first; nothing after it is attempted.
				if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "nf_conntrack_max") {
					t.Errorf("want the nf_conntrack_max permission error, got %v", err)
				}
				if len(hs.Written) != 0 {
					t.Errorf("hashsize written after a failure: %v", hs.Written)
				}
			}
		})
	}
}
