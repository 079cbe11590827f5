package takeover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/test/cluster/prober"
	"github.com/kproxy/kproxy/test/lab"
)

// kubectlTimeout bounds a kubectl call that does not wait for anything.
const kubectlTimeout = time.Minute

// Run deploys the backends and the probers, rolls out each of opts.Images in turn with
// c.SetProxyImage, and returns what the probers saw during each rollout (see the package
// contract). Its error is about the procedure (a rollout or a wait that failed, a
// prober that could not be read); whether the takeover passed is Result.OK. On error
// the Result holds the phases that ran, the failed one last. The namespace is deleted
// at the end, also on failure or cancellation (within opts.CleanupTimeout).
func Run(ctx context.Context, c Cluster, opts Options) (res Result, err error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	logger := klog.FromContext(ctx)
	ns := opts.Namespace
	res = Result{Label: opts.Label, Namespace: ns}

	if err := deleteNamespace(ctx, c, ns, opts.CleanupTimeout); err != nil {
		return res, fmt.Errorf("remove the namespace %s left by an earlier run: %w", ns, err)
	}
	var ext *lab.Process
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.CleanupTimeout+kubectlTimeout)
		defer cancel()
		var errs []error
		if ext != nil {
			if serr := ext.Stop(5 * time.Second); serr != nil {
				errs = append(errs, serr)
			}
		}
		if !opts.Keep {
			errs = append(errs, deleteNamespace(cctx, c, ns, opts.CleanupTimeout))
		}
		if cerr := errors.Join(errs...); cerr != nil {
			err = errors.Join(err, fmt.Errorf("takeover cleanup: %w", cerr))
		}
	}()

	logger.Info("Takeover: deploying the backends", "namespace", ns, "replicas", opts.Backends)
	if err := apply(ctx, c, NamespaceObject(ns), BackendDeployment(ns, opts.BackendImage, opts.Backends), BackendService(ns)); err != nil {
		return res, err
	}
	if err := rolloutStatus(ctx, c, ns, "deployment/"+BackendName, opts.ReadyTimeout); err != nil {
		return res, err
	}
	var svc corev1.Service
	if err := getJSON(ctx, c, &svc, "-n", ns, "get", "service", BackendName, "-o", "json"); err != nil {
		return res, err
	}
	podTargets, extTargets, err := serviceTargets(&svc, c.WorkerAddresses())
	if err != nil {
		return res, err
	}
	res.ClusterIPs = clusterIPs(&svc)
	res.NodePortTCP, res.NodePortUDP = nodePort(&svc, corev1.ProtocolTCP), nodePort(&svc, corev1.ProtocolUDP)

	logger.Info("Takeover: deploying the probers", "podTargets", targetStrings(podTargets), "externalTargets", targetStrings(extTargets))
	if err := apply(ctx, c, ProberDaemonSet(ns, opts.ProberImage, podTargets, opts.Rate, opts.ProbeTimeout)); err != nil {
		return res, err
	}
	if err := rolloutStatus(ctx, c, ns, "daemonset/"+ProberName, opts.ReadyTimeout); err != nil {
		return res, err
	}
	pods, err := proberPods(ctx, c, ns)
	if err != nil {
		return res, err
	}
	args := []string{"run", "--name=" + External, "--listen=" + opts.ExternalListen,
		"--rate=" + strconv.FormatFloat(opts.Rate, 'g', -1, 64), "--timeout=" + opts.ProbeTimeout.String()}
	for _, t := range extTargets {
		args = append(args, "--target="+t.String())
	}
	ext, err = c.StartClientProcess("kproxy-prober-external", opts.ProberBin, args...)
	if err != nil {
		return res, fmt.Errorf("start the external prober: %w", err)
	}
	var srcs []*tracked
	for _, p := range pods {
		srcs = append(srcs, &tracked{source: &podSource{c: c, namespace: ns, pod: p.Name, node: p.Spec.NodeName}, targets: targetStrings(podTargets), next: -1})
	}
	srcs = append(srcs, &tracked{source: newExternalSource(c.ClientNS(), ext, opts.ExternalListen), targets: targetStrings(extTargets), next: -1})

	logger.Info("Takeover: waiting for every prober to see every target answer", "probers", len(srcs), "timeout", opts.ReadyTimeout)
	alive := func() error {
		if done, _ := ext.Exited(); done {
			return fmt.Errorf("the external prober exited (%w); log:\n%s", ext.ExitReason(), ext.LogTail(20))
		}
		return nil
	}
	if err := waitClean(ctx, srcs, opts.ReadyTimeout, time.Second, alive); err != nil {
		return res, err
	}

	phases, err := runPhases(ctx, c, srcs, opts)
	res.Phases = phases
	return res, err
}

// runPhases runs the baseline (if any) and one phase per image, reading every prober
// at the end of each.
func runPhases(ctx context.Context, c Cluster, srcs []*tracked, opts Options) ([]Phase, error) {
	logger := klog.FromContext(ctx)
	type step struct {
		name, image string
		wait        time.Duration
	}
	var steps []step
	if opts.Baseline > 0 {
		steps = append(steps, step{BaselinePhase, "", opts.Baseline})
	}
	for _, img := range opts.Images {
		steps = append(steps, step{img, img, opts.Settle})
	}
	var phases []Phase
	for _, st := range steps {
		ph := Phase{Name: st.name, Image: st.image, Start: time.Now()}
		var perr error
		if st.image != "" {
			logger.Info("Takeover: rolling out kube-proxy", "image", st.image)
			perr = c.SetProxyImage(ctx, st.image)
			ph.Rollout = prober.Duration(time.Since(ph.Start))
			if perr != nil {
				perr = fmt.Errorf("roll out kube-proxy image %s: %w", st.image, perr)
			}
		}
		if perr == nil {
			perr = sleep(ctx, st.wait)
		}
		// Read the probers even when the phase failed: what they saw explains why.
		sums, cerr := collectPhase(ctx, srcs)
		ph.End = time.Now()
		ph.Probers = sums
		perr = errors.Join(perr, cerr)
		if perr != nil {
			ph.Err = perr.Error()
		}
		phases = append(phases, ph)
		if perr != nil {
			return phases, fmt.Errorf("takeover phase %s: %w", st.name, perr)
		}
		all := mergeAll(ph.Probers)
		logger.Info("Takeover: phase done", "phase", st.name, "rollout", time.Duration(ph.Rollout).Round(time.Millisecond),
			"failures", all.Failures(), "longestOutage", all.LongestOutage().String())
	}
	return phases, nil
}

// collectPhase ends the window of every prober, also when ctx has ended (then within
// a bound of its own), and returns the summaries it could read.
func collectPhase(ctx context.Context, srcs []*tracked) ([]ProberSummary, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*collectTimeout)
		defer cancel()
	}
	sums, err := collect(ctx, srcs, true)
	read := make([]ProberSummary, 0, len(sums))
	for _, s := range sums {
		if s.Location != "" {
			read = append(read, s)
		}
	}
	return read, err
}

func mergeAll(ps []ProberSummary) prober.Summary {
	ss := make([]prober.Summary, 0, len(ps))
	for _, p := range ps {
		ss = append(ss, p.Summary)
	}
	return prober.Merge(ss...)
}

// waitClean reads (and resets) every prober every interval until, in one round, each
// saw every one of its targets answer and none fail; the next window starts then. It
// gives up at once when alive fails.
func waitClean(ctx context.Context, srcs []*tracked, timeout, interval time.Duration, alive func() error) error {
	deadline := time.Now().Add(timeout)
	for round := 1; ; round++ {
		sums, err := collect(ctx, srcs, true)
		problems := cleanProblems(sums, err)
		if len(problems) == 0 {
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every prober saw every target answer without a failure within %s (%d rounds); in the last round:\n  %s",
				timeout, round, strings.Join(problems, "\n  "))
		}
		if err := sleep(ctx, interval); err != nil {
			return fmt.Errorf("waiting for every prober to see every target answer: %w; in the last round:\n  %s", err, strings.Join(problems, "\n  "))
		}
	}
}

// cleanProblems says why a round of summaries is not clean: an error reading a prober,
// a target without a success, a failed probe.
func cleanProblems(sums []ProberSummary, err error) []string {
	var ps []string
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				ps = append(ps, line)
			}
		}
	}
	for _, s := range sums {
		for _, t := range s.Summary.Targets {
			last := ""
			if t.LastError != nil {
				last = "; last error: " + t.LastError.Error
			}
			switch {
			case t.Successes == 0:
				ps = append(ps, fmt.Sprintf("%s, %s: no success in %d probes%s", s.Location, t.Target, t.Attempts, last))
			case t.Failures > 0:
				ps = append(ps, fmt.Sprintf("%s, %s: %d of %d probes failed%s", s.Location, t.Target, t.Failures, t.Attempts, last))
			}
		}
	}
	return ps
}

// serviceTargets are what the probers probe: from pods, every ClusterIP of svc over TCP
// and UDP; from outside, the NodePorts on every worker address of the Service's
// families.
func serviceTargets(svc *corev1.Service, workers []netip.Addr) (pod, ext []prober.Target, err error) {
	ips := clusterIPs(svc)
	if len(ips) == 0 {
		return nil, nil, fmt.Errorf("service %s/%s has no ClusterIP", svc.Namespace, svc.Name)
	}
	tcp, udp := nodePort(svc, corev1.ProtocolTCP), nodePort(svc, corev1.ProtocolUDP)
	if tcp == 0 || udp == 0 {
		return nil, nil, fmt.Errorf("service %s/%s lacks a TCP or UDP NodePort (tcp %d, udp %d)", svc.Namespace, svc.Name, tcp, udp)
	}
	var v4, v6 bool
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, nil, fmt.Errorf("service %s/%s: ClusterIP %q: %w", svc.Namespace, svc.Name, s, err)
		}
		ip = ip.Unmap()
		v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
		pod = append(pod, prober.NewTarget(prober.TCP, netip.AddrPortFrom(ip, servicePort)), prober.NewTarget(prober.UDP, netip.AddrPortFrom(ip, servicePort)))
	}
	for _, a := range workers {
		a = a.Unmap()
		if (a.Is4() && !v4) || (a.Is6() && !v6) {
			continue // the Service has no NodePort in that family
		}
		ext = append(ext, prober.NewTarget(prober.TCP, netip.AddrPortFrom(a, uint16(tcp))), prober.NewTarget(prober.UDP, netip.AddrPortFrom(a, uint16(udp))))
	}
	if len(ext) == 0 {
		return nil, nil, fmt.Errorf("no worker address (of %v) in the families of service %s/%s (ClusterIPs %v)", workers, svc.Namespace, svc.Name, ips)
	}
	return pod, ext, nil
}

func clusterIPs(svc *corev1.Service) []string {
	ips := slices.Clone(svc.Spec.ClusterIPs)
	if len(ips) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ips = []string{svc.Spec.ClusterIP}
	}
	return ips
}

func nodePort(svc *corev1.Service, proto corev1.Protocol) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Protocol == proto && p.Port == servicePort {
			return p.NodePort
		}
	}
	return 0
}

func targetStrings(ts []prober.Target) []string {
	ss := make([]string, 0, len(ts))
	for _, t := range ts {
		ss = append(ss, t.String())
	}
	return ss
}

// proberPods are the prober DaemonSet's running pods, by node, one per scheduled node.
func proberPods(ctx context.Context, c Cluster, ns string) ([]corev1.Pod, error) {
	var ds appsv1.DaemonSet
	if err := getJSON(ctx, c, &ds, "-n", ns, "get", "daemonset", ProberName, "-o", "json"); err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := getJSON(ctx, c, &list, "-n", ns, "get", "pods", "-l", nameLabel+"="+proberApp, "-o", "json"); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	if want := int(ds.Status.DesiredNumberScheduled); len(pods) == 0 || len(pods) != want {
		return nil, fmt.Errorf("daemonset %s/%s: %d running prober pods, want %d (one per node)", ns, ProberName, len(pods), want)
	}
	return pods, nil
}

func apply(ctx context.Context, c Cluster, objs ...runtime.Object) error {
	y, err := ToYAML(objs...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	if _, err := c.Kubectl(ctx, bytes.NewReader(y), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply: %w", err)
	}
	return nil
}

func rolloutStatus(ctx context.Context, c Cluster, ns, what string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+kubectlTimeout)
	defer cancel()
	if _, err := c.Kubectl(ctx, nil, "-n", ns, "rollout", "status", what, "--timeout="+timeout.String()); err != nil {
		return fmt.Errorf("waiting for the rollout of %s/%s (up to %s): %w", ns, what, timeout, err)
	}
	return nil
}

func getJSON(ctx context.Context, c Cluster, into any, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	out, err := c.Kubectl(ctx, nil, args...)
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func deleteNamespace(ctx context.Context, c Cluster, ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+kubectlTimeout)
	defer cancel()
	if _, err := c.Kubectl(ctx, nil, "delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout="+timeout.String()); err != nil {
		return fmt.Errorf("delete namespace %s (waiting up to %s): %w", ns, timeout, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
