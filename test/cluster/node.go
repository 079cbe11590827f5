package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
)

// kernelTunables are the sysctls the kubelet checks (setupKernelTunables in upstream's
// container manager) with the values it wants. They are host-wide, so the kubelet reads
// them from files bind-mounted over /proc/sys in its mount namespace; with
// protectKernelDefaults it fails rather than write, should one be missing.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// Paths inside a worker's mount namespace (tmpfs there, so per node).
const (
	containerdSocket = "/run/containerd/containerd.sock"
	cniDataDir       = "/var/lib/cni/networks"
)

// SandboxImage is the pause image every pod sandbox runs.
const SandboxImage = "registry.k8s.io/pause:3.10.2"

func (w *Worker) path(parts ...string) string {
	return filepath.Join(append([]string{w.Dir}, parts...)...)
}

// nsenter runs argv in the worker's network and mount namespaces.
func (w *Worker) nsenter(argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(w.holder.Pid()), "--mount", "--net", "--"}, argv...)
}

func (c *Cluster) startWorkers(ctx context.Context) error {
	images, err := readImageIndex(c.opts.ImageDir)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range c.Workers {
		g.Go(func() error {
			if err := c.startWorker(gctx, w, images); err != nil {
				return fmt.Errorf("%s: %w", w.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (c *Cluster) startWorker(ctx context.Context, w *Worker, images []imageRef) error {
	w.Dir = filepath.Join(c.WorkDir, w.Name)
	for _, d := range []string{"containerd/root", "containerd/opt", "kubelet", "kubelet-certs", "pod-logs", "cni/net.d", "sysctl"} {
		if err := os.MkdirAll(w.path(d), 0o755); err != nil {
			return err
		}
	}
	cg := c.nodeCgroup(w)
	if err := c.makeCgroup(cg); err != nil {
		return err
	}

	// The holder: a process in the node's network namespace and a new private mount
	// namespace that the node's daemons enter. It is the first process of the cgroup.
	argv, err := joinCgroupArgv(cg, inNetns(w.NS, "unshare", "--mount", "--propagation", "private", "sleep", "infinity")...)
	if err != nil {
		return err
	}
	if w.holder, err = c.startProcess(w.NS, w.Name+"-mounts", argv...); err != nil {
		return err
	}
	w.holder.KillOnStop = true
	if err := waitFor(ctx, w.Name+"'s mount namespace holder to exec sleep", 10*time.Second, 20*time.Millisecond, func(context.Context) error {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", w.holder.Pid()))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(comm)) != "sleep" {
			return fmt.Errorf("holder is still %q", strings.TrimSpace(string(comm)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := c.setupMounts(ctx, w); err != nil {
		return err
	}

	if err := os.WriteFile(w.path("containerd.toml"), []byte(containerdConfig(w)), 0o644); err != nil {
		return err
	}
	argv, err = joinCgroupArgv(cg, w.nsenter("containerd", "--config", w.path("containerd.toml"))...)
	if err != nil {
		return err
	}
	if w.containerd, err = c.startProcess(w.NS, w.Name+"-containerd", argv...); err != nil {
		return err
	}
	ctr := func(args ...string) []string {
		return w.nsenter(append([]string{"ctr", "--address", containerdSocket}, args...)...)
	}
	if err := c.waitProcess(ctx, w.containerd, w.Name+"'s containerd (ctr version)", func(ctx context.Context) error {
		_, err := runArgv(ctx, ctr("version"))
		return err
	}); err != nil {
		return err
	}
	for _, im := range images {
		if _, err := runArgv(ctx, ctr("-n", "k8s.io", "images", "import", filepath.Join(c.opts.ImageDir, im.File))); err != nil {
			return fmt.Errorf("import %s: %w", im.Ref, err)
		}
	}

	kubeconfig := w.path("kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.APIServerURL(), c.token, c.pki.CAPEM); err != nil {
		return err
	}
	if err := os.WriteFile(w.path("resolv.conf"), []byte("# no upstream resolver: the cluster is offline\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(w.path("kubelet.yaml"), []byte(kubeletConfig(w, cg)), 0o644); err != nil {
		return err
	}
	argv, err = joinCgroupArgv(cg, w.nsenter(filepath.Join(c.opts.BinDir, "kubelet"),
		"--config="+w.path("kubelet.yaml"),
		"--kubeconfig="+kubeconfig,
		"--root-dir="+w.path("kubelet"),
		"--cert-dir="+w.path("kubelet-certs"),
		"--hostname-override="+w.Name,
		"--node-ip="+w.V4.String()+","+w.V6.String(),
		"--node-labels="+corev1.LabelTopologyZone+"="+w.Zone,
		"--v=1",
	)...)
	if err != nil {
		return err
	}
	w.kubelet, err = c.startProcess(w.NS, w.Name+"-kubelet", argv...)
	return err
}

// setupMounts makes the worker's mount namespace: tmpfs over /run and /var/lib, and
// the kernel tunables' files over /proc/sys.
func (c *Cluster) setupMounts(ctx context.Context, w *Worker) error {
	script := []string{
		"set -e",
		"mount -t tmpfs -o mode=0755 kproxy-cluster-run /run",
		"mount -t tmpfs -o mode=0755 kproxy-cluster-varlib /var/lib",
		"mkdir -p /run/netns " + cniDataDir,
	}
	// `ip netns exec` mounted a sysfs of the node's network namespace over /sys, which
	// hides the host's cgroup hierarchies: mount them again (the same hierarchies, as
	// the host has them) for the kubelet, containerd and runc.
	cg, err := cgroupMountScript()
	if err != nil {
		return err
	}
	script = append(script, cg...)
	for key, val := range kernelTunables {
		f := w.path("sysctl", strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(f, []byte(val+"\n"), 0o644); err != nil {
			return err
		}
		script = append(script, "mount --bind "+f+" /proc/sys/"+key)
	}
	_, err = runArgv(ctx, []string{"nsenter", "--target", strconv.Itoa(w.holder.Pid()), "--mount", "--", "sh", "-c", strings.Join(script, "\n")})
	return err
}

func containerdConfig(w *Worker) string {
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # runc cannot set the pause container's negative oom_score_adj without
  # CAP_SYS_RESOURCE, which this machine drops.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, w.path("containerd/root"), containerdSocket, w.path("containerd/opt"), SandboxImage, cniPluginDir, w.path("cni/net.d"))
}

func kubeletConfig(w *Worker, cgroupRoot string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 hosts: kubelet 1.37 refuses them unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
address: "::"
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
podLogsDir: %s
protectKernelDefaults: true
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
localStorageCapacityIsolation: false
`, cgroupRoot, containerdSocket, ClusterDNS, ClusterDomain, w.path("resolv.conf"), w.path("pod-logs"))
}

// imageRef is one line of the images' index.txt: a docker-archive and its name.
type imageRef struct{ File, Ref string }

func readImageIndex(dir string) ([]imageRef, error) {
	f, err := os.Open(filepath.Join(dir, "index.txt"))
	if err != nil {
		return nil, fmt.Errorf("images: %w (hack/cluster-images.sh builds them)", err)
	}
	defer f.Close()
	var out []imageRef
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("images: index.txt: bad line %q", sc.Text())
		}
		out = append(out, imageRef{File: fields[0], Ref: fields[1]})
	}
	return out, sc.Err()
}
