package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// BinDirEnv overrides where the lab finds etcd and kube-apiserver.
const BinDirEnv = "KPROXY_BIN_DIR"

// Options configures a lab. The zero value is a usable default.
type Options struct {
	// Prefix starts every namespace name (DefaultPrefix when empty).
	Prefix string
	// BinDir holds etcd and kube-apiserver. Default: $KPROXY_BIN_DIR, else
	// <repo root>/_output/bin with the repo root found by walking up to go.mod.
	BinDir string
	// WorkDir holds logs, keys, etcd data and the kubeconfig. Default: a new temporary
	// directory, removed by Close unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Node1Pods and Node2Pods are the pod counts (defaults 3 and 2; -1 means none).
	Node1Pods, Node2Pods int
	// BackendPorts are served by every pod (DefaultBackendPorts when nil).
	BackendPorts []BackendPort
	// SkipControlPlane builds only the network (no etcd, API server or Node objects).
	SkipControlPlane bool
	// External, when set, is an API server the lab uses instead of starting etcd
	// and kube-apiserver (ExternalControlPlane; only in the test VM).
	External *ExternalControlPlane
	// ExtraAPIServerArgs are appended to kube-apiserver's command line.
	ExtraAPIServerArgs []string
	// ReadyTimeout bounds waiting for etcd and the API server (default 60s).
	ReadyTimeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o.Node1Pods = defaultCount(o.Node1Pods, 3)
	o.Node2Pods = defaultCount(o.Node2Pods, 2)
	if o.BackendPorts == nil {
		o.BackendPorts = DefaultBackendPorts
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if !o.SkipControlPlane && o.External == nil {
		dir, err := ResolveBinDir(o.BinDir)
		if err != nil {
			return o, err
		}
		o.BinDir = dir
	}
	return o, nil
}

func defaultCount(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// ResolveBinDir returns dir if set, else $KPROXY_BIN_DIR, else <repo root>/_output/bin.
func ResolveBinDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if env := os.Getenv(BinDirEnv); env != "" {
		return env, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "_output", "bin"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s; set %s", wd, BinDirEnv)
		}
	}
}

// Preflight reports why a lab with opts cannot start here (not root, missing tools or
// binaries), or nil. Tests use it to skip with a clear reason.
func Preflight(opts Options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("needs iproute2 (`ip`): %w", err)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if o.SkipControlPlane || o.External != nil {
		return nil
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		p := filepath.Join(o.BinDir, b)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("missing binary %s (build it with hack/build-tools.sh or set %s)", p, BinDirEnv)
		}
	}
	return nil
}
