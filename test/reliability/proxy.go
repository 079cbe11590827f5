package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// UpstreamBinEnv overrides where upstream's binary is found (as in the differential
// suite).
const UpstreamBinEnv = "KPROXY_UPSTREAM_BIN"

// Modes are the proxy modes every scenario runs in (this kernel has no IPVS).
var Modes = []string{bench.ModeNFTables, bench.ModeIPTables}

// Proxies returns kproxy (proxytest.Binary: $KPROXY_PROXY_BIN or built from this tree)
// and upstream's binary ($KPROXY_UPSTREAM_BIN or <bin dir>/kube-proxy-upstream).
func Proxies() ([]bench.Proxy, error) {
	ours, err := proxytest.Binary()
	if err != nil {
		return nil, fmt.Errorf("kproxy binary: %w", err)
	}
	up := os.Getenv(UpstreamBinEnv)
	if up == "" {
		dir, err := lab.ResolveBinDir("")
		if err != nil {
			return nil, fmt.Errorf("upstream binary: %w", err)
		}
		up = filepath.Join(dir, "kube-proxy-upstream")
	}
	if st, err := os.Stat(up); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("missing upstream binary %s (build it with hack/build-tools.sh or set %s)", up, UpstreamBinEnv)
	}
	return []bench.Proxy{{Name: "kproxy", Bin: ours}, {Name: "upstream", Bin: up}}, nil
}

// startTimeout bounds a proxy start until its first sync of both families; upstream
// takes about 9 s in iptables mode at 1,000 Services on an idle machine (lab-facts.md).
const startTimeout = 2 * time.Minute

// startSynced starts p in node1 in mode and waits until /healthz answers and both
// families have synced once. It returns the proxy and how long that took.
func startSynced(ctx context.Context, l *lab.Lab, p bench.Proxy, mode string) (*proxytest.Proxy, time.Duration, error) {
	start := time.Now()
	px, err := proxytest.Start(l, proxytest.Options{Name: p.Name + "-" + mode, Mode: mode, Bin: p.Bin})
	if err != nil {
		return nil, 0, fmt.Errorf("start %s (%s mode): %w", p.Name, mode, err)
	}
	if err := px.WaitHealthy(ctx, startTimeout); err != nil {
		_ = px.Process.Stop(5 * time.Second)
		return nil, 0, fmt.Errorf("%s (%s mode): %w", p.Name, mode, err)
	}
	if err := px.WaitSynced(ctx, startTimeout); err != nil {
		_ = px.Process.Stop(5 * time.Second)
		return nil, 0, fmt.Errorf("%s (%s mode): %w", p.Name, mode, err)
	}
	return px, time.Since(start), nil
}

// stopAndReset stops px and empties node1's dataplane for the next run.
func stopAndReset(l *lab.Lab, px *proxytest.Proxy) error {
	err := px.Process.Stop(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.ResetNode1Dataplane(ctx)
	if err != nil {
		return fmt.Errorf("stop %s: %w", px.Process.Name, err)
	}
	return nil
}

// rss is the VmRSS of px in MiB (0 when it cannot be read).
func rss(px *proxytest.Proxy) float64 {
	v, _ := bench.ProcRSS(px.Process.Pid())
	return v
}
