// Package takeover is the takeover test: on a running cluster whose kube-proxy
// DaemonSet runs one image, roll out another (kproxy's, then upstream's again) while
// probes run continuously, and show that no probe failed and no outage exceeded a
// second (MaxOutage), in each phase.
//
// Run needs a Cluster (package test/cluster implements it):
//
//	type Cluster interface {
//		Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error)
//		ClientNS() *lab.NS
//		WorkerAddresses() []netip.Addr
//		SetProxyImage(ctx context.Context, image string) error
//		StartClientProcess(name, bin string, args ...string) (*lab.Process, error)
//	}
//
// Kubectl runs kubectl with the cluster's kubeconfig in the client namespace and
// returns its stdout (the error carries stderr); ClientNS is the namespace outside the
// cluster, on the nodes' L2 segment; WorkerAddresses are the workers' InternalIPs, both
// families, reachable from ClientNS; SetProxyImage patches kube-system/kube-proxy's
// image and returns once the rollout is complete (every pod updated and Ready);
// StartClientProcess runs a program in ClientNS, stopped at the cluster's teardown at
// the latest.
//
// What Run does, in the namespace Options.Namespace (kproxy-takeover):
//   - deletes the namespace if an earlier run left it, then creates it with a Deployment
//     of agnhost netexec backends (3, spread over the nodes, ready on /readyz) behind a
//     dual-stack (PreferDualStack) NodePort Service "backend": port 80 over TCP to 8080
//     and over UDP to 8081;
//   - deploys kproxy-prober as a DaemonSet (image kproxy.local/prober:dev, never
//     pulled), one pod per node, each probing every ClusterIP of the Service over TCP
//     and UDP, and runs kproxy-prober in the client namespace (Options.ProberBin)
//     probing the TCP and UDP NodePorts on every worker address of the Service's
//     families;
//   - waits (Options.ReadyTimeout) until, in one round of reading every prober, every
//     prober saw every target answer and nothing fail, and names what was not reached
//     when it gives up; that round's reads start the first measured window;
//   - then, per phase (a baseline that changes nothing when Options.Baseline is set, and
//     one per Options.Images, in order): SetProxyImage, probing Options.Settle more
//     after the rollout completed, then ends every prober's window (`kubectl exec POD
//     -- /kproxy-prober report --reset` for pods, POST /reset over ClientNS for the
//     external one). Each prober's windows are consecutive, so no probe escapes every
//     phase; a prober that restarted (its window number jumps back) fails the run.
//   - deletes the namespace (unless Options.Keep) and stops the external prober, also
//     when it fails or is cancelled, within Options.CleanupTimeout.
//
// Judging is separate from running: Run's error is about the procedure (a rollout that
// did not complete, a prober that could not be read); Result.Failures(MaxOutage) lists
// the failed probes and long outages (and targets not probed at all), Result.OK says
// whether there were none, and Result.WriteMarkdown renders a table per phase, prober
// and target. Progress is logged with the context's klog logger.
package takeover
