package metrics

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/metrics/metricstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.families from the current code")

// touchAll gives every metric of m a series (for the IPv4 family), so a Gather
// shows every registered family with its labels.
func touchAll(m *Metrics) {
	f := m.Family(v1.IPv4Protocol)
	f.ObserveSync(time.Millisecond)
	f.ObserveFullSync(time.Millisecond)
	f.ObservePartialSync(time.Millisecond)
	f.SetLastSync(time.Unix(1, 0))
	f.SetLastQueued(time.Unix(1, 0))
	f.ObserveNetworkProgramming(time.Second)
	f.SetNoLocalEndpoints(TrafficPolicyInternal, 0)
	f.IncIPTablesRestoreFailures()
	f.IncIPTablesPartialRestoreFailures()
	f.SetIPTablesRules(TableNAT, 1)
	f.SetIPTablesRulesLastSync(TableNAT, 1)
	f.IncNFTablesSyncFailures()
	f.IncNFTablesCleanupFailures()
	f.SetLocalhostNodePortListeners(0)
	f.IncLocalhostNodePortListenerFailures()
	f.ObserveConntrackReconcile(time.Millisecond)
	f.AddConntrackDeletedEntries(0)
	m.ProxyHealthz(200)
	m.ProxyLivez(200)
	m.ServiceChanged(0)
	m.EndpointsChanged(0)
	m.WinKernelLBCreateFailure.WithLabelValues("IPv4", "t", "e").Inc()
	m.WinKernelLBUpdateFailure.WithLabelValues("IPv4", "t", "e").Inc()
	m.WinKernelLBDeleteFailure.WithLabelValues("IPv4", "t", "e").Inc()
}

// ownFamilies is what the registry of New exposes in mode once every metric has a
// series: the daemon's options (build info, nfacct readers in iptables mode) with
// default feature gates.
func ownFamilies(t *testing.T, mode string) []metricstest.Family {
	t.Helper()
	reg := NewRegistry()
	m := New(reg)
	info := CurrentBuildInfo("v1.37.2-kproxy")
	opts := RegisterOptions{Mode: mode, BuildInfo: &info}
	if mode == ModeIPTables {
		opts.IPTablesCounters = func(context.Context, string) (uint64, error) { return 0, nil }
	}
	if err := m.Register(opts); err != nil {
		t.Fatal(err)
	}
	touchAll(m)
	fams, err := metricstest.Gather(NewGatherer(reg, nil))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// ownedHere tells the families this package defines (the rest of /metrics comes
// from the process-wide registry; internal/app compares those).
func ownedHere(name string) bool {
	return strings.HasPrefix(name, "kubeproxy_") || name == "kubernetes_build_info"
}

// TestFamiliesGolden fails when a family goes missing, appears, or changes type or
// labels: testdata/<mode>.families is the expected list (go test -update rewrites it).
func TestFamiliesGolden(t *testing.T) {
	for _, mode := range []string{ModeNFTables, ModeIPTables} {
		t.Run(mode, func(t *testing.T) {
			got := ownFamilies(t, mode)
			path := filepath.Join("testdata", mode+".families")
			if *update {
				header := "Families of kproxy's own registry (internal/metrics) in " + mode + " mode with default feature gates,\n" +
					"every metric given a series: name, type, label names. Written by go test -update; compared\n" +
					"with upstream's by TestFamiliesMatchUpstream."
				if err := metricstest.WriteFile(path, header, got); err != nil {
					t.Fatal(err)
				}
			}
			want, err := metricstest.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range metricstest.Diff(got, want, nil) {
				t.Error(d)
			}
		})
	}
}

// TestFamiliesMatchUpstream checks the expected lists against what upstream
// kube-proxy v1.37.2 exposes (testdata/upstream-v1.37.2-<mode>.families): the same
// kubeproxy_* families and kubernetes_build_info, with the same types and labels.
func TestFamiliesMatchUpstream(t *testing.T) {
	for _, mode := range []string{ModeNFTables, ModeIPTables} {
		t.Run(mode, func(t *testing.T) {
			ours, err := metricstest.ReadFile(filepath.Join("testdata", mode+".families"))
			if err != nil {
				t.Fatal(err)
			}
			upstream, err := metricstest.ReadFile(filepath.Join("testdata", "upstream-v1.37.2-"+mode+".families"))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range metricstest.Diff(ours, upstream, ownedHere) {
				t.Error(d)
			}
		})
	}
}

func TestCurrentBuildInfo(t *testing.T) {
	info := CurrentBuildInfo("v1.37.2-kproxy")
	if info.Major != "1" || info.Minor != "37" || info.GitVersion != "v1.37.2-kproxy" {
		t.Errorf("version fields %+v", info)
	}
	if info.GoVersion == "" || info.Compiler == "" || !strings.Contains(info.Platform, "/") || info.BuildDate != unknownBuildDate {
		t.Errorf("runtime fields %+v", info)
	}
	for _, tc := range []struct{ in, major, minor string }{
		{"v1.37.2", "1", "37"}, {"1.38.0-alpha.1", "1", "38"}, {"dev", "", ""}, {"v1.x", "", ""}, {"", "", ""},
	} {
		if major, minor := majorMinor(tc.in); major != tc.major || minor != tc.minor {
			t.Errorf("majorMinor(%q) = %q %q, want %q %q", tc.in, major, minor, tc.major, tc.minor)
		}
	}
}
