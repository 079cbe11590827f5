package cluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kproxy/kproxy/internal/config"
)

//go:embed manifests/coredns.yaml
var coreDNSManifest []byte

// Proxy images as hack/cluster-images.sh names them.
const (
	UpstreamProxyImage = "registry.k8s.io/kube-proxy:v1.37.2"
	ProxyContainer     = "kube-proxy"
)

// Kubectl runs kubectl with the admin kubeconfig in the client namespace, with stdin
// (nil for none). It returns kubectl's stdout; the error carries its stderr.
func (c *Cluster) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := c.Client.NS.Command(ctx, filepath.Join(c.opts.BinDir, "kubectl"), append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	return stdout.String(), nil
}

// ProxyConfig is what the cluster changes in deploy/'s kube-proxy ConfigMap: the
// proxy mode (as config.conf's mode) and nothing else the user would not.
type ProxyConfig struct {
	Mode string // "nftables", "iptables" or "" (blank: iptables, as upstream)
}

// proxyConfigMap renders deploy/kube-proxy-config.yaml for this cluster: the API
// server's address in kubeconfig.conf, the pod CIDRs as clusterCIDR, the mode, and
// conntrack.maxPerCore and min 0 (the conntrack table size is host-wide: a proxy in a
// node's namespace must not resize the host's). Every edit must match exactly once.
func (c *Cluster) proxyConfigMap(cfg ProxyConfig) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(c.opts.DeployDir, "kube-proxy-config.yaml"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	mode := cfg.Mode
	if mode == "" {
		mode = `""`
	}
	for _, e := range [][2]string{
		{"server: https://control-plane.invalid:6443", "server: " + c.APIServerURL()},
		{`    clusterCIDR: ""`, "    clusterCIDR: " + PodCIDRV4.String() + "," + PodCIDRV6.String()},
		{"      maxPerCore: null", "      maxPerCore: 0"},
		{"      min: null", "      min: 0"},
		{"    mode: iptables", "    mode: " + mode},
	} {
		if n := strings.Count(s, e[0]); n != 1 {
			return nil, fmt.Errorf("deploy/kube-proxy-config.yaml: %q occurs %d times, want once", e[0], n)
		}
		s = strings.Replace(s, e[0], e[1], 1)
	}
	return []byte(s), nil
}

// proxyManifest renders deploy/kube-proxy.yaml with image.
func (c *Cluster) proxyManifest(image string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(c.opts.DeployDir, "kube-proxy.yaml"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	const shipped = "image: kproxy.local/kube-proxy:"
	i := strings.Index(s, shipped)
	if i < 0 || strings.Count(s, shipped) != 1 {
		return nil, fmt.Errorf("deploy/kube-proxy.yaml: want one %q", shipped)
	}
	end := strings.IndexByte(s[i:], '\n')
	return []byte(s[:i] + "image: " + image + s[i+end:]), nil
}

// DeployProxy applies the kube-proxy addon of deploy/ with image and cfg, and waits
// until every node runs a Ready kube-proxy pod of it.
func (c *Cluster) DeployProxy(ctx context.Context, image string, cfg ProxyConfig) error {
	cm, err := c.proxyConfigMap(cfg)
	if err != nil {
		return err
	}
	ds, err := c.proxyManifest(image)
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, bytes.NewReader(append(append(cm, "\n---\n"...), ds...)), "apply", "-f", "-"); err != nil {
		return err
	}
	return c.waitProxyRollout(ctx)
}

// SetProxyConfig replaces the kube-proxy ConfigMap and restarts the DaemonSet's pods
// (a rolling restart, as an operator does after editing it), waiting for the rollout.
func (c *Cluster) SetProxyConfig(ctx context.Context, cfg ProxyConfig) error {
	cm, err := c.proxyConfigMap(cfg)
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, bytes.NewReader(cm), "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "rollout", "restart", "daemonset/kube-proxy"); err != nil {
		return err
	}
	return c.waitProxyRollout(ctx)
}

// SetProxyImage changes the kube-proxy DaemonSet's image (a rolling update, one node at
// a time as the DaemonSet's default maxUnavailable 1 does) and waits for the rollout.
func (c *Cluster) SetProxyImage(ctx context.Context, image string) error {
	if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "set", "image", "daemonset/kube-proxy", ProxyContainer+"="+image); err != nil {
		return err
	}
	return c.waitProxyRollout(ctx)
}

func (c *Cluster) waitProxyRollout(ctx context.Context) error {
	if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout="+c.opts.ReadyTimeout.String()); err != nil {
		logs, _ := c.Kubectl(ctx, nil, "-n", "kube-system", "logs", "-l", "k8s-app=kube-proxy", "--tail=20", "--prefix")
		return fmt.Errorf("kube-proxy rollout: %w\nkube-proxy logs:\n%s", err, logs)
	}
	return nil
}

// DeployDNS applies CoreDNS (manifests/coredns.yaml) and waits until it is available
// (its readiness needs the kubernetes Service, so a proxy must run first).
func (c *Cluster) DeployDNS(ctx context.Context) error {
	if _, err := c.Kubectl(ctx, bytes.NewReader(coreDNSManifest), "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout="+c.opts.ReadyTimeout.String()); err != nil {
		logs, _ := c.Kubectl(ctx, nil, "-n", "kube-system", "logs", "-l", "k8s-app=kube-dns", "--tail=20", "--prefix")
		return fmt.Errorf("coredns rollout: %w\ncoredns logs:\n%s", err, logs)
	}
	return nil
}

// KproxyImage is the image `make image` builds (internal/config.Version's tag).
var KproxyImage = "kproxy.local/kube-proxy:" + config.Version

// WriteKubectlWrapper writes WorkDir/kubectl, a script that runs kubectl in the client
// namespace with the admin kubeconfig, and returns its path.
func (c *Cluster) WriteKubectlWrapper() (string, error) {
	p := filepath.Join(c.WorkDir, "kubectl")
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s --kubeconfig=%s \"$@\"\n", c.Client.NS.Name, filepath.Join(c.opts.BinDir, "kubectl"), c.KubeconfigPath)
	return p, os.WriteFile(p, []byte(script), 0o755)
}

// UseProxy makes the DaemonSet run image with cfg: it applies the addon (the first time,
// or when the image changes, which rolls the pods) and otherwise restarts the pods so
// that they read the new ConfigMap, then waits for the rollout.
func (c *Cluster) UseProxy(ctx context.Context, image string, cfg ProxyConfig) error {
	c.mu.Lock()
	prev := c.proxyImage
	c.mu.Unlock()
	if err := c.DeployProxy(ctx, image, cfg); err != nil {
		return err
	}
	if prev == image {
		if _, err := c.Kubectl(ctx, nil, "-n", "kube-system", "rollout", "restart", "daemonset/kube-proxy"); err != nil {
			return err
		}
		if err := c.waitProxyRollout(ctx); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.proxyImage = image
	c.mu.Unlock()
	return nil
}
