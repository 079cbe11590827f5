package differential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// Lab timeouts: each bounds one condition awaited.
const (
	// labSyncTimeout bounds a proxy's start until its first sync of both families
	// (or its exit). Upstream's iptables mode takes seconds on a loaded machine.
	labSyncTimeout = 90 * time.Second
	// eventsTimeout bounds waiting for the Events of a run to arrive and settle.
	eventsTimeout = 20 * time.Second
	// eventsQuiet is how long the node's Events must stay unchanged to count as
	// settled (the recorder writes asynchronously, in no guaranteed order).
	eventsQuiet = 1500 * time.Millisecond
)

// The servers every lab case leaves at their defaults, as seen from inside node1.
const (
	metricsBase = "http://127.0.0.1:10249"
	healthzBase = "http://127.0.0.1:10256"
)

// Observation is what one binary did in the lab for one case.
type Observation struct {
	// Exited is set when the proxy exited before its first sync, with Exit.
	Exited bool
	Exit   int
	// Configz, ProxyMode and Metrics are what it served after its first sync.
	Configz   []byte
	ProxyMode string
	Metrics   map[string]string // family name -> "type [label names]"
	// Events are the node's Events: "reason/type" -> note (and action).
	Events map[string]string
	// Log is the tail of the proxy's log, for failure messages.
	Log string
}

// Outcome is the observation's outcome, as compared.
func (o Observation) Outcome() string {
	if o.Exited {
		return fmt.Sprintf("exited with status %d before its first sync", o.Exit)
	}
	return "ran and synced both families"
}

// labConfig writes c's config for the lab (kubeadm's kubeconfig path, and the
// placeholders, pointing at the lab) and returns the expanded arguments.
func labConfig(l *lab.Lab, c *Case) ([]string, error) {
	ph := Placeholders{
		Config:      filepath.Join(l.WorkDir, "diff-"+c.Name+".yaml"),
		Kubeconfig:  l.KubeconfigPath,
		Node:        l.Node1.Name,
		ClusterCIDR: lab.ClusterCIDRs.V4.String() + "," + lab.ClusterCIDRs.V6.String(),
	}
	if c.Config != "" {
		cfg := strings.ReplaceAll(ph.Expand(c.Config), KubeadmKubeconfig, l.KubeconfigPath)
		if err := os.WriteFile(ph.Config, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
	}
	return ph.ExpandAll(c.Lab.Args), nil
}

// observe runs bin with args in node1 until its first sync (or exit), collects what
// it serves and the node's Events, and stops it. Node1's dataplane and the node's
// Events are reset first, so nothing of a previous run is seen.
func observe(ctx context.Context, l *lab.Lab, bin Binary, name string, args []string) (Observation, error) {
	var obs Observation
	l.ResetNode1Dataplane(ctx)
	if err := deleteNodeEvents(ctx, l); err != nil {
		return obs, err
	}
	p, err := l.StartProcess(l.Node1.NS, "diff-"+name+"-"+bin.Name, bin.Path, args...)
	if err != nil {
		return obs, err
	}
	defer func() { _ = p.Stop(3 * time.Second) }()
	httpc := &http.Client{Transport: &http.Transport{DialContext: l.Node1.NS.Dial}, Timeout: 2 * time.Second}

	synced := func(ctx context.Context) error {
		_, body, err := get(ctx, httpc, metricsBase+"/metrics")
		if err != nil {
			return err
		}
		for _, fam := range []string{"IPv4", "IPv6"} {
			if !strings.Contains(body, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="`+fam+`"}`) {
				return fmt.Errorf("no sync of %s yet", fam)
			}
		}
		return nil
	}
	err = waitFor(ctx, "the first sync of both families (or the exit) of "+bin.Name, labSyncTimeout, p.Done(), synced)
	if done, werr := p.Exited(); done {
		obs.Exited, obs.Exit = true, exitStatus(werr)
		obs.Log = p.LogTail(15)
		obs.Events, err = settledEvents(ctx, l, false)
		return obs, err
	}
	if err != nil {
		return obs, fmt.Errorf("%w; log tail:\n%s", err, p.LogTail(30))
	}
	// A kubelet probes health; the probe counters are part of what is compared.
	for _, path := range []string{"/healthz", "/livez"} {
		_, _, _ = get(ctx, httpc, healthzBase+path)
	}
	var body string
	if _, body, err = get(ctx, httpc, metricsBase+"/configz"); err != nil {
		return obs, fmt.Errorf("GET /configz: %w", err)
	}
	obs.Configz = []byte(body)
	if _, obs.ProxyMode, err = get(ctx, httpc, metricsBase+"/proxyMode"); err != nil {
		return obs, fmt.Errorf("GET /proxyMode: %w", err)
	}
	if obs.Events, err = settledEvents(ctx, l, true); err != nil {
		return obs, fmt.Errorf("%w; log tail:\n%s", err, p.LogTail(30))
	}
	// Scraped last: every family a first sync and the probes produce exists by now.
	if _, body, err = get(ctx, httpc, metricsBase+"/metrics"); err != nil {
		return obs, fmt.Errorf("GET /metrics: %w", err)
	}
	if obs.Metrics, err = MetricFamilies(strings.NewReader(body)); err != nil {
		return obs, fmt.Errorf("parsing /metrics of %s: %w", bin.Name, err)
	}
	obs.Log = p.LogTail(15)
	return obs, nil
}

func exitStatus(err error) int {
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	}
	return -1
}

func get(ctx context.Context, c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, truncate(string(b), 200))
	}
	return resp.StatusCode, string(b), err
}

// waitFor polls cond every 100ms until it returns nil, done is closed, or timeout
// passes; the error says what was awaited and why it was last not met.
func waitFor(ctx context.Context, what string, timeout time.Duration, done <-chan struct{}, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last := cond(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("waiting for %s: the process exited (last: %w)", what, last)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not met after %s (last: %w)", what, timeout, last)
		case <-tick.C:
		}
	}
}

// nodeEvents lists the Events about node1, keyed "reason/type".
func nodeEvents(ctx context.Context, l *lab.Lab) (map[string]string, error) {
	list, err := l.Client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Node" || e.Regarding.Name != l.Node1.Name {
			continue
		}
		out[e.Reason+"/"+e.Type] = fmt.Sprintf("note %q, action %q, by %q", e.Note, e.Action, e.ReportingController)
	}
	return out, nil
}

// settledEvents waits until node1's Events stop changing for eventsQuiet (and, when
// wantStarting, include the Starting event every running proxy records).
func settledEvents(ctx context.Context, l *lab.Lab, wantStarting bool) (map[string]string, error) {
	var last map[string]string
	var lastChange time.Time
	err := waitFor(ctx, "node1's Events to settle", eventsTimeout, nil, func(ctx context.Context) error {
		cur, err := nodeEvents(ctx, l)
		if err != nil {
			return err
		}
		if !sameMap(cur, last) || lastChange.IsZero() {
			last, lastChange = cur, time.Now()
		}
		if wantStarting {
			if _, ok := cur["Starting/"+v1.EventTypeNormal]; !ok {
				return fmt.Errorf("no Starting event yet (have %v)", sortedKeys(cur))
			}
		}
		if quiet := time.Since(lastChange); quiet < eventsQuiet {
			return fmt.Errorf("changed %s ago", quiet.Round(time.Millisecond))
		}
		return nil
	})
	return last, err
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func deleteNodeEvents(ctx context.Context, l *lab.Lab) error {
	err := l.Client.CoreV1().Events(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("deleting the previous run's Events: %w", err)
	}
	return nil
}

// describeEvents renders an events map for a report.
func describeEvents(m map[string]string) string {
	keys := sortedKeys(m)
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
