package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kproxy/kproxy/test/cluster/prober"
	"github.com/kproxy/kproxy/test/lab"
)

func dualStackService() *corev1.Service {
	svc := BackendService("ns1")
	svc.Spec.ClusterIPs = []string{"10.96.0.5", "fd00:10:96::5"}
	svc.Spec.ClusterIP = "10.96.0.5"
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.Ports[1].NodePort = 30081
	return svc
}

func addrs(ss ...string) []netip.Addr {
	var as []netip.Addr
	for _, s := range ss {
		as = append(as, netip.MustParseAddr(s))
	}
	return as
}

func TestServiceTargets(t *testing.T) {
	workers := addrs("192.0.2.11", "2001:db8:1::11", "192.0.2.12", "2001:db8:1::12")
	pod, ext, err := serviceTargets(dualStackService(), workers)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(targetStrings(pod), " "), "tcp://10.96.0.5:80 udp://10.96.0.5:80 tcp://[fd00:10:96::5]:80 udp://[fd00:10:96::5]:80"; got != want {
		t.Errorf("pod targets:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(targetStrings(ext), " "), "tcp://192.0.2.11:30080 udp://192.0.2.11:30081 tcp://[2001:db8:1::11]:30080 udp://[2001:db8:1::11]:30081 "+
		"tcp://192.0.2.12:30080 udp://192.0.2.12:30081 tcp://[2001:db8:1::12]:30080 udp://[2001:db8:1::12]:30081"; got != want {
		t.Errorf("external targets:\n got %s\nwant %s", got, want)
	}

	single := dualStackService()
	single.Spec.ClusterIPs = []string{"10.96.0.5"}
	if _, ext, err := serviceTargets(single, workers); err != nil || len(ext) != 4 || strings.Contains(strings.Join(targetStrings(ext), " "), "[") {
		t.Errorf("an IPv4-only service: external targets %v (%v), want the 4 IPv4 ones", ext, err)
	}
	if _, _, err := serviceTargets(single, addrs("2001:db8:1::11")); err == nil {
		t.Error("no worker address in the service's family: want an error")
	}
	noPort := dualStackService()
	noPort.Spec.Ports[1].NodePort = 0
	if _, _, err := serviceTargets(noPort, workers); err == nil || !strings.Contains(err.Error(), "NodePort") {
		t.Errorf("a service without a UDP NodePort: %v, want an error naming the NodePort", err)
	}
	none := dualStackService()
	none.Spec.ClusterIPs, none.Spec.ClusterIP = nil, ""
	if _, _, err := serviceTargets(none, workers); err == nil {
		t.Error("a service without a ClusterIP: want an error")
	}
}

func TestParseSummary(t *testing.T) {
	s, err := parseSummary("Warning: something\n{\"prober\":\"node-1\",\"window\":3,\"targets\":[]}\n")
	if err != nil || s.Prober != "node-1" || s.Window != 3 {
		t.Errorf("parseSummary = %+v, %v", s, err)
	}
	if _, err := parseSummary("error: unable to upgrade connection"); err == nil {
		t.Error("parseSummary of no JSON: want an error")
	}
}

// fakeSource reports scripted summaries: script(window) gives the targets of each
// window it ends.
type fakeSource struct {
	name   string
	mu     sync.Mutex
	window int
	script func(window int) []prober.TargetSummary
	err    error
}

func (f *fakeSource) location() string { return f.name }

func (f *fakeSource) read(_ context.Context, reset bool) (prober.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return prober.Summary{}, f.err
	}
	s := prober.Summary{Prober: f.name, Window: f.window, Targets: f.script(f.window)}
	if reset {
		f.window++
	}
	return s, nil
}

func clean(names ...string) func(int) []prober.TargetSummary {
	return func(int) []prober.TargetSummary {
		var ts []prober.TargetSummary
		for _, n := range names {
			ts = append(ts, prober.TargetSummary{Target: n, Attempts: 20, Successes: 20})
		}
		return ts
	}
}

func track(s source, targets ...string) *tracked {
	return &tracked{source: s, targets: targets, next: -1}
}

func TestCollectNoticesRestartsAndMissingTargets(t *testing.T) {
	a := &fakeSource{name: "pod on node-1", script: clean("tcp://10.96.0.5:80")}
	b := &fakeSource{name: External, script: clean("tcp://192.0.2.11:30080")}
	srcs := []*tracked{track(a, "tcp://10.96.0.5:80"), track(b, "tcp://192.0.2.11:30080", "udp://192.0.2.11:30081")}
	sums, err := collect(context.Background(), srcs, true)
	if err == nil || !strings.Contains(err.Error(), "external: does not probe udp://192.0.2.11:30081") {
		t.Errorf("collect: %v, want the external prober's missing target", err)
	}
	if len(sums) != 2 || sums[0].Location != "pod on node-1" || sums[1].Location != External {
		t.Errorf("summaries %+v, want one per source in order", sums)
	}
	srcs[1].targets = srcs[1].targets[:1]
	if _, err := collect(context.Background(), srcs, true); err != nil {
		t.Errorf("second round: %v", err)
	}
	a.mu.Lock()
	a.window = 0 // the pod restarted
	a.mu.Unlock()
	if _, err := collect(context.Background(), srcs, true); err == nil || !strings.Contains(err.Error(), "pod on node-1: reported window 0, want 2: the prober restarted") {
		t.Errorf("after a restart: %v, want it noticed", err)
	}
}

func TestWaitClean(t *testing.T) {
	// node-1's UDP target answers from its third window on; node-2's is clean.
	a := &fakeSource{name: "pod on node-1", script: func(w int) []prober.TargetSummary {
		ts := clean("tcp://10.96.0.5:80", "udp://10.96.0.5:80")(w)
		if w < 2 {
			ts[1] = prober.TargetSummary{Target: "udp://10.96.0.5:80", Attempts: 20, Failures: 20, LastError: &prober.ProbeError{Error: "receive: i/o timeout"}}
		}
		return ts
	}}
	b := &fakeSource{name: "pod on node-2", script: clean("tcp://10.96.0.5:80", "udp://10.96.0.5:80")}
	srcs := []*tracked{track(a, "tcp://10.96.0.5:80", "udp://10.96.0.5:80"), track(b, "tcp://10.96.0.5:80", "udp://10.96.0.5:80")}
	alive := func() error { return nil }
	if err := waitClean(context.Background(), srcs, 10*time.Second, time.Millisecond, alive); err != nil {
		t.Fatalf("waitClean: %v", err)
	}
	if a.window != 3 || srcs[0].next != 3 {
		t.Errorf("node-1 was read %d times (next window %d), want 3", a.window, srcs[0].next)
	}

	// Never clean: the error names the prober, the target and its last error.
	a.mu.Lock()
	a.window = 0
	a.mu.Unlock()
	srcs = []*tracked{track(a, "tcp://10.96.0.5:80", "udp://10.96.0.5:80")}
	a.script = func(w int) []prober.TargetSummary {
		return []prober.TargetSummary{{Target: "tcp://10.96.0.5:80", Attempts: 20, Successes: 20}, {Target: "udp://10.96.0.5:80", Attempts: 20, Failures: 20, LastError: &prober.ProbeError{Error: "receive: i/o timeout"}}}
	}
	err := waitClean(context.Background(), srcs, 20*time.Millisecond, time.Millisecond, alive)
	if err == nil || !strings.Contains(err.Error(), "within 20ms") || !strings.Contains(err.Error(), "pod on node-1, udp://10.96.0.5:80: no success in 20 probes; last error: receive: i/o timeout") {
		t.Errorf("waitClean on a broken target: %v, want it named with its last error", err)
	}
	if err := waitClean(context.Background(), srcs, time.Minute, time.Millisecond, func() error { return errors.New("the external prober exited") }); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("waitClean with a dead prober: %v, want at once its error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitClean(ctx, srcs, time.Minute, time.Second, alive); !errors.Is(err, context.Canceled) {
		t.Errorf("waitClean cancelled: %v, want context.Canceled", err)
	}
}

// fakeCluster answers kubectl from a script and records what it was asked.
type fakeCluster struct {
	mu       sync.Mutex
	calls    []string
	stdin    []string
	images   []string
	kubectl  func(args []string) (string, error)
	setImage func(image string) error
}

func (f *fakeCluster) Kubectl(_ context.Context, stdin io.Reader, args ...string) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join(args, " "))
	if stdin != nil {
		b, _ := io.ReadAll(stdin)
		f.stdin = append(f.stdin, string(b))
	}
	f.mu.Unlock()
	return f.kubectl(args)
}

func (f *fakeCluster) ClientNS() *lab.NS { return nil }

func (f *fakeCluster) WorkerAddresses() []netip.Addr {
	return addrs("192.0.2.11", "2001:db8:1::11", "192.0.2.12", "2001:db8:1::12", "192.0.2.13", "2001:db8:1::13")
}

func (f *fakeCluster) SetProxyImage(_ context.Context, image string) error {
	f.mu.Lock()
	f.images = append(f.images, image)
	f.mu.Unlock()
	if f.setImage != nil {
		return f.setImage(image)
	}
	return nil
}

func (f *fakeCluster) StartClientProcess(name, bin string, args ...string) (*lab.Process, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "start "+name+" "+bin+" "+strings.Join(args, " "))
	f.mu.Unlock()
	return nil, errors.New("no client namespace in a unit test")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunDeploysAndCleansUp(t *testing.T) {
	var pods corev1.PodList
	for i := 3; i >= 1; i-- {
		pods.Items = append(pods.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kproxy-prober-%d", i)},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	svc := mustJSON(t, dualStackService())
	ds := `{"status":{"desiredNumberScheduled":3}}`
	c := &fakeCluster{kubectl: func(args []string) (string, error) {
		switch a := strings.Join(args, " "); {
		case strings.HasPrefix(a, "-n kproxy-takeover get service backend"):
			return svc, nil
		case strings.HasPrefix(a, "-n kproxy-takeover get daemonset kproxy-prober"):
			return ds, nil
		case strings.HasPrefix(a, "-n kproxy-takeover get pods"):
			return mustJSON(t, pods), nil
		default:
			return "", nil
		}
	}}
	_, err := Run(context.Background(), c, Options{Images: []string{"kproxy.local/kproxy:dev"}, ProberBin: "/bin/kproxy-prober", ReadyTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "start the external prober: no client namespace in a unit test") {
		t.Fatalf("Run: %v, want the failure to start the external prober", err)
	}
	want := []string{
		"delete namespace kproxy-takeover --ignore-not-found --wait=true --timeout=2m0s",
		"apply -f -",
		"-n kproxy-takeover rollout status deployment/backend --timeout=1m0s",
		"-n kproxy-takeover get service backend -o json",
		"apply -f -",
		"-n kproxy-takeover rollout status daemonset/kproxy-prober --timeout=1m0s",
		"-n kproxy-takeover get daemonset kproxy-prober -o json",
		"-n kproxy-takeover get pods -l app.kubernetes.io/name=kproxy-takeover-prober -o json",
		"start kproxy-prober-external /bin/kproxy-prober run --name=external --listen=127.0.0.1:9999 --rate=5 --timeout=1s " +
			"--target=tcp://192.0.2.11:30080 --target=udp://192.0.2.11:30081 --target=tcp://[2001:db8:1::11]:30080 --target=udp://[2001:db8:1::11]:30081 " +
			"--target=tcp://192.0.2.12:30080 --target=udp://192.0.2.12:30081 --target=tcp://[2001:db8:1::12]:30080 --target=udp://[2001:db8:1::12]:30081 " +
			"--target=tcp://192.0.2.13:30080 --target=udp://192.0.2.13:30081 --target=tcp://[2001:db8:1::13]:30080 --target=udp://[2001:db8:1::13]:30081",
		"delete namespace kproxy-takeover --ignore-not-found --wait=true --timeout=2m0s",
	}
	if got := strings.Join(c.calls, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(c.stdin) != 2 || !strings.Contains(c.stdin[0], "kind: Deployment") || !strings.Contains(c.stdin[1], "--target=udp://[fd00:10:96::5]:80") {
		t.Errorf("applied:\n%s", strings.Join(c.stdin, "\n====\n"))
	}
	if len(c.images) != 0 {
		t.Errorf("rolled out %v before the probers were ready", c.images)
	}

	// Cleanup also runs when the backends never become ready, and its failure is reported.
	c = &fakeCluster{kubectl: func(args []string) (string, error) {
		switch a := strings.Join(args, " "); {
		case strings.Contains(a, "rollout status"):
			return "", errors.New("timed out waiting for the condition")
		case strings.HasPrefix(a, "delete") && strings.Contains(strings.Join(c.calls, "\n"), "rollout"):
			return "", errors.New("the server is gone")
		default:
			return "", nil
		}
	}}
	_, err = Run(context.Background(), c, Options{Images: []string{"x"}, ProberBin: "/bin/kproxy-prober"})
	if err == nil || !strings.Contains(err.Error(), "deployment/backend") || !strings.Contains(err.Error(), "takeover cleanup: delete namespace kproxy-takeover") {
		t.Errorf("Run with backends never ready: %v, want the rollout's and the cleanup's errors", err)
	}
	if last := c.calls[len(c.calls)-1]; !strings.HasPrefix(last, "delete namespace") {
		t.Errorf("last call %q, want the namespace's deletion", last)
	}

	if _, err := Run(context.Background(), c, Options{}); err == nil || !strings.Contains(err.Error(), "no images") || !strings.Contains(err.Error(), "ProberBin") {
		t.Errorf("Run without images or ProberBin: %v", err)
	}
}

func TestRunPhases(t *testing.T) {
	pod := &fakeSource{name: "pod on node-1", script: clean("tcp://10.96.0.5:80")}
	ext := &fakeSource{name: External, script: clean("tcp://192.0.2.11:30080")}
	srcs := []*tracked{track(pod, "tcp://10.96.0.5:80"), track(ext, "tcp://192.0.2.11:30080")}
	c := &fakeCluster{}
	opts := Options{Images: []string{"kproxy:dev", "upstream:v1"}, Baseline: time.Millisecond, Settle: time.Millisecond}
	phases, err := runPhases(context.Background(), c, srcs, opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ph := range phases {
		names = append(names, fmt.Sprintf("%s(%s):%d", ph.Name, ph.Image, len(ph.Probers)))
		if ph.End.Before(ph.Start) {
			t.Errorf("phase %s ends before it starts", ph.Name)
		}
	}
	if got := strings.Join(names, " "); got != "baseline():2 kproxy:dev(kproxy:dev):2 upstream:v1(upstream:v1):2" {
		t.Errorf("phases = %s", got)
	}
	if strings.Join(c.images, " ") != "kproxy:dev upstream:v1" {
		t.Errorf("rolled out %v, want kproxy:dev then upstream:v1", c.images)
	}
	if w := phases[2].Probers[1].Summary.Window; w != 2 {
		t.Errorf("the last phase read the external prober's window %d, want 2", w)
	}
	if !(Result{Phases: phases}).OK(MaxOutage) {
		t.Errorf("clean phases fail: %v", Result{Phases: phases}.Failures(MaxOutage))
	}

	// A rollout that fails ends the run, with what the probers saw during it.
	c = &fakeCluster{setImage: func(image string) error {
		if image == "upstream:v1" {
			return errors.New("daemonset kube-system/kube-proxy: 1 of 3 pods not Ready after 5m")
		}
		return nil
	}}
	phases, err = runPhases(context.Background(), c, srcs, Options{Images: []string{"kproxy:dev", "upstream:v1", "never"}})
	if err == nil || !strings.Contains(err.Error(), "takeover phase upstream:v1: roll out kube-proxy image upstream:v1: daemonset") {
		t.Errorf("runPhases with a failing rollout: %v", err)
	}
	if len(phases) != 2 || phases[1].Err == "" || len(phases[1].Probers) != 2 {
		t.Errorf("phases after a failed rollout = %+v, want 2, the last with its error and both probers", phases)
	}
}
