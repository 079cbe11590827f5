package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	Process *lab.Process
	Started time.Time // just before the process was started
}

// StartOptions vary how a proxy is started.
type StartOptions struct {
	// MinSyncZero starts the proxy with minSyncPeriod 0. The configuration file cannot
	// say 0 (defaulting turns 0 into 1s, upstream and kproxy alike) and flags are
	// ignored when --config is given, so the proxy is then configured by flags only:
	// the same settings as proxytest.Config plus --iptables-min-sync-period=0 (which
	// upstream and kproxy apply to nftables mode too).
	MinSyncZero bool
}

// Start runs p in node1 in nftables mode; the lab stops it at teardown at the latest.
func Start(l *lab.Lab, p Proxy, tag string, o StartOptions) (*Running, error) {
	name := fmt.Sprintf("%s-%s", p.Name, tag)
	var args []string
	if o.MinSyncZero {
		args = []string{
			"--kubeconfig=" + l.KubeconfigPath,
			"--hostname-override=" + l.Node1.Name,
			"--proxy-mode=nftables",
			"--cluster-cidr=" + lab.ClusterCIDRs.V4.String() + "," + lab.ClusterCIDRs.V6.String(),
			"--conntrack-max-per-core=0",
			"--iptables-min-sync-period=0",
			"-v=2",
		}
	} else {
		path := filepath.Join(l.WorkDir, name+".yaml")
		if err := os.WriteFile(path, []byte(proxytest.Config(l, proxytest.Options{Mode: "nftables"})), 0o600); err != nil {
			return nil, err
		}
		args = []string{"--config=" + path, "-v=2"}
	}
	started := time.Now()
	proc, err := l.StartProcess(l.Node1.NS, name, p.Bin, args...)
	if err != nil {
		return nil, err
	}
	return &Running{Proxy: p, Process: proc, Started: started}, nil
}

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

// Stop stops the proxy and resets node1's dataplane: the kube-proxy tables of both
// families are deleted and conntrack is flushed, so the next proxy starts from nothing.
func (r *Running) Stop(ctx context.Context, l *lab.Lab) error {
	err := r.Process.Stop(5 * time.Second)
	ResetDataplane(ctx, l)
	return err
}

// ResetDataplane deletes what a proxy may have left in node1.
func ResetDataplane(ctx context.Context, l *lab.Lab) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, fam := range []string{"ip", "ip6"} {
		_, _ = l.Node1.NS.Run(ctx, "nft", "delete", "table", fam, "kube-proxy")
	}
	_, _ = l.Node1.NS.Run(ctx, "conntrack", "-F")
}
