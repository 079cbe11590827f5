package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kproxy/kproxy/test/lab"
)

// APIServerURL is the API server's address on the node network.
func (c *Cluster) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.CP.V4.String(), fmt.Sprint(APIServerPort))
}

func (c *Cluster) cpDir() string { return filepath.Join(c.WorkDir, "controlplane") }

// startControlPlane runs etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler in the control-plane namespace, with one system:masters token for
// every component and client (the tests' too), RBAC and Node authorization, and
// service-account tokens the controller manager signs.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	dir := c.cpDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ips := []netip.Addr{c.CP.V4, c.CP.V6, APIServiceV4, APIServiceV6, netip.MustParseAddr("127.0.0.1")}
	names := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain, "localhost"}
	var err error
	if c.pki, err = writePKI(dir, ips, names); err != nil {
		return err
	}
	saKey, saPub, err := lab.WriteServiceAccountKeys(dir)
	if err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	c.token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(c.token+`,cluster-admin,cluster-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	c.KubeconfigPath = filepath.Join(c.WorkDir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.APIServerURL(), c.token, c.pki.CAPEM); err != nil {
		return err
	}

	cp := c.CP.NS
	const etcdURL = "http://127.0.0.1:2379"
	etcd, err := c.startProcess(cp, "etcd", inNetns(cp, filepath.Join(c.opts.BinDir, "etcd"),
		"--name=cluster",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=cluster=http://127.0.0.1:2380",
		"--unsafe-no-fsync", // throw-away data
		"--log-level=warn",
	)...)
	if err != nil {
		return err
	}
	etcd.KillOnStop = true
	httpc := &http.Client{Transport: &http.Transport{DialContext: cp.Dial}, Timeout: 2 * time.Second}
	if err := c.waitProcess(ctx, etcd, "etcd /health", func(ctx context.Context) error {
		return lab.GetOK(ctx, httpc, etcdURL+"/health")
	}); err != nil {
		return err
	}

	serviceCIDRs := ServiceCIDRV4.String() + "," + ServiceCIDRV6.String()
	apiserver, err := c.startProcess(cp, "kube-apiserver", inNetns(cp, filepath.Join(c.opts.BinDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--advertise-address="+c.CP.V4.String(),
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", APIServerPort),
		"--tls-cert-file="+c.pki.CertPath,
		"--tls-private-key-file="+c.pki.KeyPath,
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--token-auth-file="+tokenFile,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDomain,
		"--service-cluster-ip-range="+serviceCIDRs,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	)...)
	if err != nil {
		return err
	}
	apiserver.KillOnStop = true

	c.RESTConfig = &rest.Config{
		Host:            c.APIServerURL(),
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.CAPEM},
		Dial:            c.Client.NS.Dial,
		QPS:             100,
		Burst:           200,
		UserAgent:       "kproxy-cluster",
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.Clientset = cs
	if err := c.waitProcess(ctx, apiserver, "kube-apiserver /readyz", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}

	kcm, err := c.startProcess(cp, "kube-controller-manager", inNetns(cp, filepath.Join(c.opts.BinDir, "kube-controller-manager"),
		"--kubeconfig="+c.KubeconfigPath,
		"--authentication-skip-lookup=true",
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--allocate-node-cidrs=true",
		"--cluster-cidr="+PodCIDRV4.String()+","+PodCIDRV6.String(),
		"--node-cidr-mask-size-ipv4=24",
		"--node-cidr-mask-size-ipv6=64",
		"--service-cluster-ip-range="+serviceCIDRs,
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+c.pki.CAPath,
		"--use-service-account-credentials=true",
		"--controllers=*",
		"--profiling=false",
	)...)
	if err != nil {
		return err
	}
	kcm.KillOnStop = true
	sched, err := c.startProcess(cp, "kube-scheduler", inNetns(cp, filepath.Join(c.opts.BinDir, "kube-scheduler"),
		"--kubeconfig="+c.KubeconfigPath,
		"--authentication-kubeconfig="+c.KubeconfigPath,
		"--authorization-kubeconfig="+c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--profiling=false",
	)...)
	if err != nil {
		return err
	}
	sched.KillOnStop = true
	// The controller manager is up when it has made the default namespace's
	// kube-root-ca.crt, which every pod's service-account volume needs.
	return c.waitProcess(ctx, kcm, "kube-root-ca.crt in namespace default (kube-controller-manager)", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

func inNetns(ns *lab.NS, bin string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", ns.Name, bin}, args...)
}

// waitProcess polls check until it succeeds, p exits or ReadyTimeout passes; failures
// carry the tail of p's log.
func (c *Cluster) waitProcess(ctx context.Context, p *lab.Process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	err := waitFor(ctx, what, c.opts.ReadyTimeout, pollInterval, check)
	if err != nil {
		if done, _ := p.Exited(); done {
			return fmt.Errorf("%s exited (%w) before ready; log tail:\n%s", p.Name, p.ExitReason(), p.LogTail(30))
		}
		return fmt.Errorf("%w; %s log tail:\n%s", err, p.Name, p.LogTail(30))
	}
	return nil
}
