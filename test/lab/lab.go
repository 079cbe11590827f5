package lab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Node is a lab node: a namespace with its pods.
type Node struct {
	NodePlan
	NS   *NS
	Pods []*Pod
}

// Pod is a lab pod: a namespace behind its node, running backends.
type Pod struct {
	PodPlan
	NS      *NS
	Node    *Node
	Servers []*Server
}

// Endpoint returns the pod as a ready endpoint with both of its addresses.
func (p *Pod) Endpoint() Endpoint {
	return ReadyEndpoint(p.Name, p.Node.Name, p.Node.Zone, p.IPs.V4, p.IPs.V6)
}

// Lab is a running local cluster. Fields are valid after Start succeeds.
type Lab struct {
	Options Options // with defaults applied by Start
	Plan    Plan
	ID      string // namespace name prefix of this instance: <prefix><pid>-<rand>-

	Node1, Node2 *Node
	Ext          *NS    // external client
	Pods         []*Pod // node1's pods, then node2's

	Client         kubernetes.Interface
	RESTConfig     *rest.Config
	KubeconfigPath string
	Token          string
	WorkDir        string
	BinDir         string
	APIServer      *Process
	Etcd           *Process
	// StartDuration is how long Start took; Timings breaks it down.
	StartDuration time.Duration
	Timings       Timings

	mu         sync.Mutex
	started    bool
	closed     bool
	closeOnce  sync.Once
	closeErr   error
	ownWorkDir bool
	namespaces []*NS // created, in creation order
	processes  []*Process
	servers    []*Server

	apiServerArgs     []string
	apiServerRestarts int
}

// StopGrace is how long Close lets a process handle SIGTERM before SIGKILL.
const StopGrace = 3 * time.Second

// Timings records how long the phases of Start took (each since Start began).
type Timings struct {
	Network   time.Duration // namespaces, links, addresses, routes
	Backends  time.Duration
	Etcd      time.Duration // etcd healthy
	APIServer time.Duration // /readyz answered
	Total     time.Duration
}

// New returns an unstarted lab; it has no side effects.
func New(opts Options) *Lab { return &Lab{Options: opts} }

// Namespaces lists the lab's namespaces created so far.
func (l *Lab) Namespaces() []*NS {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*NS(nil), l.namespaces...)
}

// Nodes returns node1 and node2.
func (l *Lab) Nodes() []*Node { return []*Node{l.Node1, l.Node2} }

// Pod returns the pod called name, or nil.
func (l *Lab) Pod(name string) *Pod {
	for _, p := range l.Pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Start builds the namespaces, links, backends and (unless skipped) the control plane
// with node1 and node2 registered. On failure everything built so far is torn down.
func (l *Lab) Start(ctx context.Context) (err error) {
	l.mu.Lock()
	if l.started || l.closed {
		l.mu.Unlock()
		return errors.New("lab: Start called twice or after Close")
	}
	l.started = true
	l.mu.Unlock()
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()

	logger := klog.FromContext(ctx)
	t0 := time.Now()
	opts, err := l.Options.withDefaults()
	if err != nil {
		return err
	}
	l.Options = opts
	l.BinDir = opts.BinDir
	if l.Plan, err = NewPlan(opts.Node1Pods, opts.Node2Pods); err != nil {
		return err
	}
	var rnd [2]byte
	_, _ = rand.Read(rnd[:])
	l.ID = fmt.Sprintf("%s%d-%04x-", opts.Prefix, os.Getpid(), binary.BigEndian.Uint16(rnd[:]))

	l.WorkDir = opts.WorkDir
	if l.WorkDir == "" {
		if l.WorkDir, err = os.MkdirTemp("", workDirPattern(os.Getpid())); err != nil {
			return fmt.Errorf("lab: work dir: %w", err)
		}
		l.mu.Lock()
		l.ownWorkDir = true
		l.mu.Unlock()
	} else if err := os.MkdirAll(l.WorkDir, 0o755); err != nil {
		return fmt.Errorf("lab: work dir: %w", err)
	}

	if removed, err := RemoveLeftovers(ctx, opts.Prefix); err != nil {
		return err
	} else if len(removed) > 0 {
		logger.Info("Removed leftover lab namespaces", "namespaces", removed)
	}

	if err := l.buildTopology(ctx); err != nil {
		return fmt.Errorf("lab: topology: %w", err)
	}
	l.Timings.Network = time.Since(t0)
	if err := l.startBackends(ctx); err != nil {
		return fmt.Errorf("lab: backends: %w", err)
	}
	l.Timings.Backends = time.Since(t0)
	if !opts.SkipControlPlane {
		start := l.startControlPlane
		if opts.External != nil {
			start = l.useExternalControlPlane
		}
		if err := start(ctx, t0); err != nil {
			return fmt.Errorf("lab: control plane: %w", err)
		}
		if err := l.CreateNodes(ctx); err != nil {
			return fmt.Errorf("lab: nodes: %w", err)
		}
	}
	l.StartDuration = time.Since(t0)
	l.Timings.Total = l.StartDuration
	logger.V(1).Info("Lab started", "id", l.ID, "timings", l.Timings, "workDir", l.WorkDir)
	return nil
}

// addNamespace records a created namespace for teardown; it reports false when the lab
// was closed meanwhile (the caller then deletes the namespace itself).
func (l *Lab) addNamespace(ns *NS) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.namespaces = append(l.namespaces, ns)
	return true
}

// StartProcess runs bin with args inside ns, logging to <WorkDir>/<name>.log; the lab
// stops it at Close.
func (l *Lab) StartProcess(ns *NS, name, bin string, args ...string) (*Process, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("lab: closed")
	}
	p, err := startProcess(ns, name, filepath.Join(l.WorkDir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	l.processes = append(l.processes, p)
	return p, nil
}

// Serve starts a backend in ns answering as identity; the lab closes it at Close.
func (l *Lab) Serve(ctx context.Context, ns *NS, identity string, port BackendPort) (*Server, error) {
	s, err := Serve(ctx, ns, identity, port)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = s.Close()
		return nil, errors.New("lab: closed")
	}
	l.servers = append(l.servers, s)
	return s, nil
}

func (l *Lab) startBackends(ctx context.Context) error {
	for _, pod := range l.Pods {
		for _, port := range l.Options.BackendPorts {
			s, err := l.Serve(ctx, pod.NS, pod.Name, port)
			if err != nil {
				return err
			}
			pod.Servers = append(pod.Servers, s)
		}
	}
	return nil
}

// KeepWorkDir makes Close leave the work directory (for example after a failed test).
func (l *Lab) KeepWorkDir() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Options.KeepWorkDir = true
}

// Close stops processes and servers, deletes the namespaces and removes the work
// directory. It is idempotent and safe after a partial Start; concurrent callers all
// wait for the one teardown and get its result.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Lab) close() error {
	l.mu.Lock()
	l.closed = true
	procs, servers, nss := l.processes, l.servers, l.namespaces
	removeWorkDir := l.ownWorkDir && !l.Options.KeepWorkDir
	l.mu.Unlock()

	var errs []error
	var wg sync.WaitGroup
	stopErrs := make([]error, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopErrs[i] = p.Stop(StopGrace)
		}()
	}
	wg.Wait()
	errs = append(errs, stopErrs...)
	if err := raceReports(procs); err != nil {
		errs = append(errs, err)
		removeWorkDir = false // the reports are in the logs
	}
	for _, s := range servers {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := len(nss) - 1; i >= 0; i-- {
		nss[i].closeHandle()
		if err := deleteNamespace(ctx, nss[i].Name); err != nil {
			errs = append(errs, err)
		}
	}
	if removeWorkDir && l.WorkDir != "" {
		if err := os.RemoveAll(l.WorkDir); err != nil {
			errs = append(errs, fmt.Errorf("remove work dir: %w", err))
		}
	} else if l.ownWorkDir && l.WorkDir != "" {
		// Mark it kept, so that leftover cleanup does not take it.
		_ = os.WriteFile(filepath.Join(l.WorkDir, keptMarker), nil, 0o644)
	}
	return errors.Join(errs...)
}
