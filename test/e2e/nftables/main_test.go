package nftables

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// ModeEnv selects the proxy mode the suite runs against: nftables (the default),
// iptables, ipvs (in the 6.1 VM: this machine's kernel has no IP_VS; see
// test/e2e/vmsuite), or default: a blank mode in the configuration file (kubeadm's
// ConfigMap), which is iptables mode, as upstream.
const ModeEnv = "KPROXY_E2E_MODE"

// The modes the suite knows.
const (
	modeNFTables = "nftables"
	modeIPTables = "iptables"
	modeIPVS     = "ipvs"
	modeDefault  = "default"
)

// configuredMode is the suite's ModeEnv value.
func configuredMode() string {
	if m := os.Getenv(ModeEnv); m != "" {
		return m
	}
	return modeNFTables
}

// proxyMode is the mode the proxy runs in (a blank mode runs iptables mode).
func proxyMode() string {
	if configuredMode() == modeDefault {
		return modeIPTables
	}
	return configuredMode()
}

// iptablesMode reports whether the suite runs against the iptables mode.
func iptablesMode() bool { return proxyMode() == modeIPTables }

// ipvsMode reports whether the suite runs against the ipvs mode.
func ipvsMode() bool { return proxyMode() == modeIPVS }

// otherMode is the mode the suite switches to and back from in the mode-switch
// test: from ipvs, nftables, the way docs/ipvs.md's migration goes.
func otherMode() string {
	if iptablesMode() || ipvsMode() {
		return modeNFTables
	}
	return modeIPTables
}

// skipInIPVSMode skips t in ipvs mode, for a behaviour upstream's ipvs mode does
// not have (or has differently: why says how).
func skipInIPVSMode(t *testing.T, why string) {
	t.Helper()
	if ipvsMode() {
		t.Skip("not in ipvs mode: " + why)
	}
}

var suite = &labtest.Suite{}

func TestMain(m *testing.M) {
	if m := configuredMode(); m != modeNFTables && m != modeIPTables && m != modeIPVS && m != modeDefault {
		fmt.Fprintf(os.Stderr, "%s=%q: the suite knows the modes %q, %q, %q and %q\n", ModeEnv, m, modeNFTables, modeIPTables, modeIPVS, modeDefault)
		os.Exit(2)
	}
	code := suite.Main(m)
	proxytest.RemoveBinary()
	os.Exit(code)
}

// proxyStartTimeout bounds a proxy start until /healthz answers 200.
const proxyStartTimeout = 60 * time.Second

var (
	proxyMu   sync.Mutex
	proxy     *proxytest.Proxy // the proxy currently serving the suite
	proxyErr  error
	proxyOnce sync.Once
)

func defaultOptions() proxytest.Options {
	if configuredMode() == modeDefault {
		return proxytest.Options{Mode: proxytest.BlankMode}
	}
	return proxytest.Options{Mode: proxyMode()}
}

// sharedProxy returns the suite's proxy (started once, with the default options),
// healthy.
func sharedProxy(t *testing.T) *proxytest.Proxy {
	t.Helper()
	l := suite.Lab(t)
	proxyOnce.Do(func() {
		if err := l.AddGatewayRoutes(context.Background()); err != nil {
			proxyMu.Lock()
			proxyErr = err
			proxyMu.Unlock()
			return
		}
		p, err := startHealthy(l, defaultOptions())
		proxyMu.Lock()
		proxy, proxyErr = p, err
		proxyMu.Unlock()
	})
	proxyMu.Lock()
	defer proxyMu.Unlock()
	if proxyErr != nil {
		t.Fatalf("starting kube-proxy (%s mode): %v", proxyMode(), proxyErr)
	}
	return proxy
}

func startHealthy(l *lab.Lab, o proxytest.Options) (*proxytest.Proxy, error) {
	p, err := proxytest.Start(l, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), proxyStartTimeout)
	defer cancel()
	if err := p.WaitHealthy(ctx, proxyStartTimeout); err != nil {
		_ = p.Process.Stop(3 * time.Second)
		return nil, err
	}
	// The previous proxy's rules stay in the kernel until this one's first sync.
	if err := p.WaitSynced(ctx, proxyStartTimeout); err != nil {
		_ = p.Process.Stop(3 * time.Second)
		return nil, err
	}
	return p, nil
}

// withProxy stops the shared proxy, runs a proxy with o for fn, then restores a
// shared proxy with the default options (also when fn fails the test).
func withProxy(t *testing.T, o proxytest.Options, fn func(p *proxytest.Proxy)) {
	t.Helper()
	old := sharedProxy(t)
	replaceProxy(t, old, o)
	t.Cleanup(func() {
		proxyMu.Lock()
		cur := proxy
		proxyMu.Unlock()
		if cur != nil {
			_ = cur.Process.Stop(3 * time.Second)
		}
		p, err := startHealthy(suite.Lab(t), defaultOptions())
		proxyMu.Lock()
		proxy, proxyErr = p, err
		proxyMu.Unlock()
		if err != nil {
			t.Errorf("restoring the shared proxy: %v", err)
		}
	})
	proxyMu.Lock()
	p := proxy
	proxyMu.Unlock()
	if p == nil {
		t.Fatalf("no proxy with options %+v running", o)
	}
	fn(p)
}

// replaceProxy stops old and starts a proxy with o as the shared one.
func replaceProxy(t *testing.T, old *proxytest.Proxy, o proxytest.Options) {
	t.Helper()
	if err := old.Process.Stop(3 * time.Second); err != nil {
		t.Fatalf("stopping the proxy: %v", err)
	}
	p, err := startHealthy(suite.Lab(t), o)
	proxyMu.Lock()
	proxy, proxyErr = p, err
	proxyMu.Unlock()
	if err != nil {
		t.Fatalf("starting kube-proxy with %+v: %v", o, err)
	}
}

// restartProxy stops the shared proxy and starts it again with the same options.
func restartProxy(t *testing.T) *proxytest.Proxy {
	t.Helper()
	replaceProxy(t, sharedProxy(t), defaultOptions())
	return sharedProxy(t)
}
