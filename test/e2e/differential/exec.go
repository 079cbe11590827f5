package differential

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/vm"
)

// Binary is one of the two programs compared.
type Binary struct {
	Name string // "upstream" or "kproxy"
	Path string
}

// Names of the two binaries, as differences and logs name them.
const (
	Upstream = "upstream"
	Ours     = "kproxy"
)

// offlineTimeout bounds one offline run. Every offline input ends by itself (it
// prints, fails, or fails to create its API client); one that does not is a finding.
// In the test VM (TCG, emulated CPUs) a --cleanup of ipvs mode's state runs dozens
// of iptables and ipset commands, each a process start there: 25 to 35 s per binary
// with one case at a time (measured on a loaded machine), past 30 s for both with
// three at once; so the bound there is vmOfflineTimeout.
const (
	offlineTimeout   = 30 * time.Second
	vmOfflineTimeout = 2 * time.Minute
)

// runTimeout is the bound of one offline run here.
func runTimeout() time.Duration {
	if vm.InVM() {
		return vmOfflineTimeout
	}
	return offlineTimeout
}

// Result is what one offline run did.
type Result struct {
	Exit     int // the exit status; -1 when it was killed at runTimeout
	TimedOut bool
	Stdout   string
	Stderr   string
	// Written is what --write-config-to wrote ({{out}}), when it wrote anything.
	Written     []byte
	WroteConfig bool
}

// childEnv is the environment of every run: the test's, without what would point a
// proxy at a real cluster (in-cluster configuration) or change its logging.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "KUBERNETES_") || strings.HasPrefix(k, "KPROXY_") || k == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// runOffline runs bin with c's arguments inside ns (a private namespace of the lab),
// with c's config written into dir.
func runOffline(ctx context.Context, ns *lab.NS, bin Binary, c *Case, dir string) (Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	ph := Placeholders{
		Config:      filepath.Join(dir, "config.yaml"),
		Out:         filepath.Join(dir, "written.yaml"),
		Kubeconfig:  KubeadmKubeconfig,
		Node:        "node1",
		ClusterCIDR: lab.ClusterCIDRs.V4.String() + "," + lab.ClusterCIDRs.V6.String(),
	}
	if c.Config != "" {
		if err := os.WriteFile(ph.Config, []byte(ph.Expand(c.Config)), 0o600); err != nil {
			return Result{}, err
		}
	}
	return runIn(ctx, ns, bin, ph.ExpandAll(c.Args), ph.Out)
}

// runIn runs bin with args inside ns and collects its result; out is where
// --write-config-to writes, if anywhere.
func runIn(ctx context.Context, ns *lab.NS, bin Binary, args []string, out string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout())
	defer cancel()
	cmd := ns.Command(ctx, bin.Path, args...)
	cmd.Env = childEnv()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.Exit, r.TimedOut = -1, true
	case errors.As(err, &exitErr):
		r.Exit = exitErr.ExitCode()
	case err != nil:
		return r, fmt.Errorf("running %s %s: %w", bin.Name, strings.Join(args, " "), err)
	}
	if out != "" {
		if b, err := os.ReadFile(out); err == nil {
			r.Written, r.WroteConfig = b, true
		}
	}
	return r, nil
}

// Summary is a short description of r for failure messages.
func (r Result) Summary() string {
	var b strings.Builder
	if r.TimedOut {
		fmt.Fprintf(&b, "did not exit within %s", runTimeout())
	} else {
		fmt.Fprintf(&b, "exit %d", r.Exit)
	}
	if s := tail(r.Stderr, 6); s != "" {
		fmt.Fprintf(&b, "; stderr tail:\n%s", indent(s, "        "))
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	// Usage text drowns the error that preceded it.
	var kept []string
	for _, l := range lines {
		if strings.HasPrefix(l, "      --") || strings.HasPrefix(l, "  -") || strings.HasPrefix(l, "                ") {
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
