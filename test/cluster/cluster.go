package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kproxy/kproxy/test/lab"
)

// Member is one namespace on the node network.
type Member struct {
	Name string
	NS   *lab.NS
	V4   netip.Addr
	V6   netip.Addr
}

// Worker is a Kubernetes node: containerd and a kubelet in the member's namespace,
// sharing one private mount namespace.
type Worker struct {
	Member
	// Zone is the Node's topology.kubernetes.io/zone: each worker is a zone of its own,
	// so that the topology specs (Traffic Distribution, Topology Hints), which skip on
	// fewer than 3 zones, run.
	Zone     string
	Dir      string
	PodCIDRs []netip.Prefix

	holder     *lab.Process // holds the mount namespace; its pid is the nsenter target
	containerd *lab.Process
	kubelet    *lab.Process
}

// Cluster is a running cluster (see the package doc).
type Cluster struct {
	opts    Options
	ID      string
	WorkDir string

	Switch  *lab.NS
	CP      Member
	Client  Member
	Workers []*Worker

	// KubeconfigPath is an admin kubeconfig (system:masters token, the cluster CA); its
	// server is the API server's node-network address, reachable from every member.
	KubeconfigPath string
	RESTConfig     *rest.Config // dials from the client namespace
	Clientset      kubernetes.Interface

	token string
	pki   *pki

	mu         sync.Mutex
	closed     bool
	namespaces []string
	processes  []*lab.Process
	cgroups    []string // relative cgroup paths made by the cluster, parents first
	keepWork   bool
	proxyImage string // the DaemonSet's, as UseProxy last applied it
}

// New returns a cluster that Start brings up. It has no side effects.
func New(opts Options) *Cluster { return &Cluster{opts: opts} }

// Start builds the cluster: network, control plane, workers (all Ready), and CoreDNS
// is not yet deployed (it needs a service proxy: see DeployProxy and DeployDNS). On
// failure it tears down what it built.
func (c *Cluster) Start(ctx context.Context) (err error) {
	c.opts, err = c.opts.withDefaults()
	if err != nil {
		return err
	}
	if err := Preflight(c.opts); err != nil {
		return fmt.Errorf("cluster preflight: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if stale, err := lab.RemoveLeftovers(ctx, c.opts.Prefix); err != nil {
		return fmt.Errorf("removing leftovers %v: %w", stale, err)
	}
	if err := removeLeftoverCgroups(c.opts.Prefix); err != nil {
		return err
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	c.ID = fmt.Sprintf("%s%d-%s", c.opts.Prefix, os.Getpid(), hex.EncodeToString(suffix))
	if c.opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", fmt.Sprintf("kproxy-cluster-%d-", os.Getpid()))
		if err != nil {
			return err
		}
		c.WorkDir = dir
	} else {
		c.WorkDir = c.opts.WorkDir
		if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
			return err
		}
		c.keepWork = true
	}
	t0 := time.Now()
	step := func(what string, fn func(context.Context) error) error {
		t := time.Now()
		if err := fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		c.opts.Log("cluster: %s in %.1fs", what, time.Since(t).Seconds())
		return nil
	}
	if err := step("network", c.buildNetwork); err != nil {
		return err
	}
	if err := step("control plane", c.startControlPlane); err != nil {
		return err
	}
	if err := step("workers", c.startWorkers); err != nil {
		return err
	}
	if err := step("pod network", c.setupPodNetwork); err != nil {
		return err
	}
	c.opts.Log("cluster: %d workers Ready after %.1fs", len(c.Workers), time.Since(t0).Seconds())
	return nil
}

// KeepWorkDir keeps the work directory (logs, configuration) after Close.
func (c *Cluster) KeepWorkDir() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepWork = true
}

// Close tears everything down: the kubelets first (so that they stop restarting
// containers), then every process of each node by cgroup, containerd, the control
// plane, the mount-namespace holders, the network namespaces and the cgroups. It is
// idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	procs := append([]*lab.Process(nil), c.processes...)
	names := append([]string(nil), c.namespaces...)
	cgroups := append([]string(nil), c.cgroups...)
	keep := c.keepWork
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	for _, w := range c.Workers {
		if w.kubelet != nil {
			errs = append(errs, w.kubelet.Stop(10*time.Second))
		}
	}
	// Every container, shim and daemon of a worker is in its cgroup.
	for _, w := range c.Workers {
		errs = append(errs, killCgroupTree(c.nodeCgroup(w)))
	}
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].Stop(5*time.Second))
	}
	for i := len(names) - 1; i >= 0; i-- {
		errs = append(errs, lab.DeleteNamespace(ctx, names[i]))
	}
	errs = append(errs, removeCgroups(cgroups))
	if c.Switch != nil {
		c.Switch.Close()
	}
	for _, m := range c.members() {
		if m.NS != nil {
			m.NS.Close()
		}
	}
	if c.WorkDir != "" && !keep {
		errs = append(errs, os.RemoveAll(c.WorkDir))
	}
	return errors.Join(errs...)
}

// members is every namespace on the node network: control plane, workers, client.
func (c *Cluster) members() []*Member {
	ms := []*Member{&c.CP}
	for _, w := range c.Workers {
		ms = append(ms, &w.Member)
	}
	return append(ms, &c.Client)
}

func (c *Cluster) addNamespace(name string) (*lab.NS, error) {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.namespaces = append(c.namespaces, name)
	}
	c.mu.Unlock()
	if closed {
		return nil, errors.New("cluster closed during start")
	}
	return lab.NewNS(name), nil
}

// startProcess runs argv (already wrapped to enter its namespaces) and keeps it for
// teardown; its output goes to WorkDir/logs/<name>.log.
func (c *Cluster) startProcess(ns *lab.NS, name string, argv ...string) (*lab.Process, error) {
	logDir := filepath.Join(c.WorkDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	p, err := lab.StartCommand(ns, name, filepath.Join(logDir, name+".log"), argv)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	c.processes = append(c.processes, p)
	c.mu.Unlock()
	if closed {
		return nil, errors.Join(errors.New("cluster closed during start"), p.Stop(time.Second))
	}
	return p, nil
}

// StartClientProcess runs bin in the client namespace until Close (or until stopped).
func (c *Cluster) StartClientProcess(name, bin string, args ...string) (*lab.Process, error) {
	return c.startProcess(c.Client.NS, name, append([]string{"ip", "netns", "exec", c.Client.NS.Name, bin}, args...)...)
}

// ClientNS is the namespace outside the cluster.
func (c *Cluster) ClientNS() *lab.NS { return c.Client.NS }

// WorkerAddresses are every worker's node addresses, IPv4 then IPv6.
func (c *Cluster) WorkerAddresses() []netip.Addr {
	var out []netip.Addr
	for _, w := range c.Workers {
		out = append(out, w.V4)
	}
	for _, w := range c.Workers {
		out = append(out, w.V6)
	}
	return out
}

// waitFor polls check every interval until it returns nil, ctx ends or timeout passes;
// the error says what was awaited and the last failure.
func waitFor(ctx context.Context, what string, timeout, interval time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, last)
		case <-tick.C:
		}
	}
}

func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("host program %s: %w", name, err)
	}
	return p, nil
}
