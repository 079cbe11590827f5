package proxytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// RemoveBinary deletes what Binary built (never a KPROXY_PROXY_BIN binary); call it
// from TestMain after the tests.
func RemoveBinary() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Binary builds ./cmd/kube-proxy once per test process into a temporary directory
// and returns its path (KPROXY_PROXY_BIN overrides it with a prebuilt binary).
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("KPROXY_PROXY_BIN"); p != "" {
			buildPath = p
			return
		}
		dir, err := os.MkdirTemp("", "kproxy-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		buildPath = filepath.Join(dir, "kube-proxy")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/kproxy/kproxy/cmd/kube-proxy")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building kube-proxy: %w\n%s", err, out)
		}
	})
	return buildPath, buildErr
}

// Options shape the proxy's configuration file.
type Options struct {
	// Name names the process and its log (default "kube-proxy").
	Name string
	// Mode is the proxy mode (default nftables; BlankMode writes `mode: ""`).
	Mode string
	// ExtraConfig is appended verbatim to the YAML configuration (top-level fields).
	ExtraConfig string
	// Args are extra command-line arguments.
	Args []string
	// Wrapper, when set, is a command and its arguments that run the binary (which
	// must exec it in place), such as setpriv limiting its capabilities.
	Wrapper []string
	// Bin runs this binary instead of kproxy's (Binary): upstream's, for the suites
	// that measure both the same way.
	Bin string
}

// Proxy is a running kproxy in the lab's node1.
type Proxy struct {
	Lab        *lab.Lab
	Process    *lab.Process
	ConfigPath string
	http       *http.Client
}

// BlankMode as Options.Mode leaves the mode blank in the file, as kubeadm's
// ConfigMap does (iptables mode, as upstream).
const BlankMode = "(blank)"

// Config renders the configuration file for node1 of l.
func Config(l *lab.Lab, o Options) string {
	mode := o.Mode
	switch mode {
	case "":
		mode = "nftables"
	case BlankMode:
		mode = `""`
	}
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: %s
clusterCIDR: %s,%s
# The lab shares the host's conntrack table size: never resize it (lab-facts.md).
conntrack:
  maxPerCore: 0
%s`, l.KubeconfigPath, l.Node1.Name, mode, lab.ClusterCIDRs.V4, lab.ClusterCIDRs.V6, o.ExtraConfig)
}

// Start writes the configuration and starts the proxy in node1.
func Start(l *lab.Lab, o Options) (*Proxy, error) {
	bin := o.Bin
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	if o.Name == "" {
		o.Name = "kube-proxy"
	}
	path := filepath.Join(l.WorkDir, o.Name+".yaml")
	if err := os.WriteFile(path, []byte(Config(l, o)), 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"--config=" + path, "-v=2"}, o.Args...)
	if len(o.Wrapper) > 0 {
		args = append(append(slices.Clone(o.Wrapper[1:]), bin), args...)
		bin = o.Wrapper[0]
	}
	p, err := l.StartProcess(l.Node1.NS, o.Name, bin, args...)
	if err != nil {
		return nil, err
	}
	return &Proxy{
		Lab:        l,
		Process:    p,
		ConfigPath: path,
		http:       &http.Client{Transport: &http.Transport{DialContext: l.Node1.NS.Dial}, Timeout: 2 * time.Second},
	}, nil
}

// Get fetches url (as seen from inside node1) and returns the status and body.
func (p *Proxy) Get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(body), err
}

// Metric reads the value of sample key (a metric's name, with its labels as /metrics
// prints them, e.g. go_goroutines) from the proxy's /metrics.
func (p *Proxy) Metric(ctx context.Context, key string) (float64, error) {
	got, err := p.Metrics(ctx, key)
	if err != nil {
		return 0, err
	}
	v, ok := got[key]
	if !ok {
		return 0, fmt.Errorf("/metrics has no %s", key)
	}
	return v, nil
}

// Metrics reads the samples keys (as Metric's key) from one GET of the proxy's
// /metrics; a key /metrics does not print is absent from the map.
func (p *Proxy) Metrics(ctx context.Context, keys ...string) (map[string]float64, error) {
	code, body, err := p.Get(ctx, MetricsURL)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", code)
	}
	got := make(map[string]float64, len(keys))
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		for _, key := range keys {
			rest, ok := strings.CutPrefix(line, key+" ")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return nil, fmt.Errorf("/metrics: %s: %w", key, err)
			}
			got[key] = v
		}
	}
	return got, nil
}

// HealthzURL and MetricsURL are the default servers' addresses inside node1.
const (
	HealthzURL = "http://127.0.0.1:10256/healthz"
	LivezURL   = "http://127.0.0.1:10256/livez"
	MetricsURL = "http://127.0.0.1:10249/metrics"
	ModeURL    = "http://127.0.0.1:10249/proxyMode"
)

// WaitFor polls cond every 100ms until it returns nil or timeout passes; the error
// names what was awaited and the last reason it was not met, with the proxy's log.
func (p *Proxy) WaitFor(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = cond(ctx); last == nil {
			return nil
		}
		select {
		case <-p.Process.Done():
			return fmt.Errorf("waiting for %s: the proxy exited (%w); log tail:\n%s", what, p.Process.ExitReason(), p.Process.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not met after %s (last: %w); proxy log tail:\n%s", what, timeout, last, p.Process.LogTail(40))
		case <-tick.C:
		}
	}
}

// WaitHealthy waits for /healthz to answer 200.
func (p *Proxy) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return p.WaitFor(ctx, "/healthz 200", timeout, func(ctx context.Context) error {
		code, body, err := p.Get(ctx, HealthzURL)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d: %s", code, strings.TrimSpace(body))
		}
		return nil
	})
}

// WaitSynced waits until the proxy has written its rules for every family at least
// once (its kubeproxy_sync_proxy_rules_last_timestamp_seconds series exist). /healthz
// is 200 before the first sync, as upstream's, so a test that must not see the rules
// of a previous proxy waits for this.
func (p *Proxy) WaitSynced(ctx context.Context, timeout time.Duration, families ...string) error {
	if len(families) == 0 {
		families = []string{"IPv4", "IPv6"}
	}
	return p.WaitFor(ctx, "the first sync of "+strings.Join(families, " and "), timeout, func(ctx context.Context) error {
		code, body, err := p.Get(ctx, MetricsURL)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /metrics: %d", code)
		}
		for _, f := range families {
			if !strings.Contains(body, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="`+f+`"}`) {
				return fmt.Errorf("no sync of %s yet", f)
			}
		}
		return nil
	})
}
