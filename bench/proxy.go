package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// Proxy names one of the two binaries under comparison.
type Proxy struct {
	Name string // "kproxy" or "upstream"
	Bin  string
}

// Running is a started proxy.
type Running struct {
	Proxy   Proxy
	Mode    string // ModeNFTables, ModeIPTables or ModeIPVS
	Process *lab.Process
	Started time.Time // just before the process was started
}

// StartOptions vary how a proxy is started.
type StartOptions struct {
	// MinSyncZero starts the proxy with minSyncPeriod 0. The configuration file cannot
	// say 0 (defaulting turns 0 into 1s, upstream and kproxy alike) and flags are
	// ignored when --config is given, so the proxy is then configured by flags only:
	// the same settings as proxytest.Config plus --iptables-min-sync-period=0 (which
	// upstream and kproxy apply to nftables mode too), or --ipvs-min-sync-period=0.
	// ipvs mode needs none of it: its default is 0 already (defaultMinSyncZero).
	MinSyncZero bool
}

// Start runs p in node1 in mode (nftables, iptables, or ipvs in the test VM); the lab stops it at teardown
// at the latest.
func Start(l *lab.Lab, p Proxy, mode, tag string, o StartOptions) (*Running, error) {
	name := fmt.Sprintf("%s-%s", p.Name, tag)
	var args []string
	if o.MinSyncZero {
		args = []string{
			"--kubeconfig=" + l.KubeconfigPath,
			"--hostname-override=" + l.Node1.Name,
			"--proxy-mode=" + mode,
			"--cluster-cidr=" + lab.ClusterCIDRs.V4.String() + "," + lab.ClusterCIDRs.V6.String(),
			"--conntrack-max-per-core=0",
			minSyncFlag(mode) + "=0",
			profilingFlag,
			"-v=2",
		}
	} else {
		path := filepath.Join(l.WorkDir, name+".yaml")
		if err := os.WriteFile(path, []byte(proxytest.Config(l, proxytest.Options{Mode: mode, ExtraConfig: profilingConfig})), 0o600); err != nil {
			return nil, err
		}
		args = []string{"--config=" + path, "-v=2"}
	}
	started := time.Now()
	proc, err := l.StartProcess(l.Node1.NS, name, p.Bin, args...)
	if err != nil {
		return nil, err
	}
	return &Running{Proxy: p, Mode: mode, Process: proc, Started: started}, nil
}

// minSyncFlag is the flag that sets mode's minSyncPeriod.
func minSyncFlag(mode string) string {
	if mode == ModeIPVS {
		return "--ipvs-min-sync-period"
	}
	return "--iptables-min-sync-period"
}

// defaultMinSyncZero reports whether mode's minSyncPeriod defaults to 0: upstream
// defaults ipvs.minSyncPeriod to nothing (0), iptables' and nftables' to 1s, and
// kproxy follows.
func defaultMinSyncZero(mode string) bool { return mode == ModeIPVS }

// CPU is the proxy's CPU seconds so far (with reaped children).
func (r *Running) CPU() float64 {
	v, _ := ProcCPU(r.Process.Pid())
	return v
}

// PeakRSS is the proxy's VmHWM in MiB.
func (r *Running) PeakRSS() float64 {
	v, _ := ProcPeakRSS(r.Process.Pid())
	return v
}

// RSS is the proxy's VmRSS in MiB.
func (r *Running) RSS() float64 {
	v, _ := ProcRSS(r.Process.Pid())
	return v
}

// Stop stops the proxy and resets node1's dataplane (lab.ResetNode1Dataplane), so the next
// proxy starts from nothing.
func (r *Running) Stop(ctx context.Context, l *lab.Lab) error {
	err := r.Process.Stop(5 * time.Second)
	l.ResetNode1Dataplane(ctx)
	return err
}

// IPTablesCommand is lab.IPTablesCommand: both proxies use the nft backend in the
// lab (kproxy detects it; upstream's binary runs the plain commands).
func IPTablesCommand(fam v1.IPFamily, tool string) string { return lab.IPTablesCommand(fam, tool) }

// CheckIPTablesBackend verifies, inside node1, that the plain iptables commands (which
// upstream's binary runs) use the nft backend, as kproxy does in the lab: otherwise the
// two proxies would write to different backends and the comparison would be unfair.
func CheckIPTablesBackend(ctx context.Context, l *lab.Lab) error {
	for _, name := range []string{"iptables", "ip6tables"} {
		out, err := l.Node1.NS.Run(ctx, name, "--version")
		if err != nil {
			return fmt.Errorf("%s --version in node1: %w: %s", name, err, out)
		}
		if !strings.Contains(out, "nf_tables") {
			return fmt.Errorf("%s in node1 is %q, not the nft backend kproxy uses in the lab (point the alternatives at iptables-nft, or run with -modes nftables)", name, strings.TrimSpace(out))
		}
	}
	return nil
}
