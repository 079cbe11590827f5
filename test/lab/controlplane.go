package lab

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServerPort is kube-apiserver's secure port on node1.
const APIServerPort = 6443

// APIServerURL is the API server's address as seen from inside node1 (and anything
// routed to node1): the external one's URL with Options.External.
func (l *Lab) APIServerURL() string {
	if l.Options.External != nil {
		return l.Options.External.URL
	}
	return "https://" + net.JoinHostPort(l.Node1.IPs.V4.String(), fmt.Sprint(APIServerPort))
}

func (l *Lab) startControlPlane(ctx context.Context, t0 time.Time) error {
	dir := filepath.Join(l.WorkDir, "controlplane")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	saKey, saPub, err := WriteServiceAccountKeys(dir)
	if err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	l.Token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(l.Token+`,lab-admin,lab-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}

	node1 := l.Node1.NS
	const etcdURL = "http://127.0.0.1:2379"
	l.Etcd, err = l.StartProcess(node1, "etcd", filepath.Join(l.BinDir, "etcd"),
		"--name=lab",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=lab=http://127.0.0.1:2380",
		"--unsafe-no-fsync", // throw-away data: durability buys nothing, fsync costs a lot
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	l.Etcd.KillOnStop = true
	httpc := &http.Client{Transport: &http.Transport{DialContext: node1.Dial}, Timeout: 2 * time.Second}
	if err := l.waitReady(ctx, l.Etcd, func(ctx context.Context) error {
		return GetOK(ctx, httpc, etcdURL+"/health")
	}); err != nil {
		return err
	}
	l.Timings.Etcd = time.Since(t0)

	certDir := filepath.Join(dir, "apiserver-certs")
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--advertise-address=" + l.Node1.IPs.V4.String(),
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", APIServerPort),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + ServiceCIDRs.V4.String() + "," + ServiceCIDRs.V6.String(),
		"--max-requests-inflight=2000",
		"--max-mutating-requests-inflight=1000",
		"--profiling=false",
	}
	l.apiServerArgs = append(args, l.Options.ExtraAPIServerArgs...)
	if err := l.startAPIServer("kube-apiserver"); err != nil {
		return err
	}

	return l.connect(ctx, t0)
}

// connect points the lab's client at the API server (APIServerURL, dialled from
// node1), waits until it is ready and writes the kubeconfig the proxies use.
func (l *Lab) connect(ctx context.Context, t0 time.Time) error {
	l.RESTConfig = l.restConfig(l.APIServerURL())
	cs, err := kubernetes.NewForConfig(l.RESTConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	l.Client = cs
	if err := l.waitAPIServerReady(ctx); err != nil {
		return err
	}
	l.Timings.APIServer = time.Since(t0)

	kc, err := KubeconfigBytes(l.APIServerURL(), l.Token)
	if err != nil {
		return err
	}
	l.KubeconfigPath = filepath.Join(l.WorkDir, "kubeconfig")
	return os.WriteFile(l.KubeconfigPath, kc, 0o600)
}

// restConfig is the lab's client configuration for the API server at url, dialled
// from node1.
func (l *Lab) restConfig(url string) *rest.Config {
	return &rest.Config{
		Host:            url,
		BearerToken:     l.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Dial:            DialInNamespace(l.Node1.NS),
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
		QPS:       1000,
		Burst:     2000,
		UserAgent: "kproxy-lab",
	}
}

func (l *Lab) startAPIServer(logName string) error {
	p, err := l.StartProcess(l.Node1.NS, logName, filepath.Join(l.BinDir, "kube-apiserver"), l.apiServerArgs...)
	if err != nil {
		return err
	}
	p.KillOnStop = true
	l.APIServer = p
	return nil
}

func (l *Lab) waitAPIServerReady(ctx context.Context) error {
	return l.waitReady(ctx, l.APIServer, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := l.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// RestartAPIServer kills kube-apiserver and starts it again with the same flags (etcd
// keeps the data), then waits until it is ready: for tests of clients that must ride
// out an API server restart. Each run logs to kube-apiserver-restart-N.log.
func (l *Lab) RestartAPIServer(ctx context.Context) error {
	if err := l.StopAPIServer(); err != nil {
		return err
	}
	return l.StartAPIServer(ctx)
}

// StopAPIServer kills kube-apiserver (etcd keeps the data): until StartAPIServer,
// every client of the lab finds it unreachable.
func (l *Lab) StopAPIServer() error {
	if l.Options.External != nil {
		return errors.New("the lab's API server is external (Options.External): it cannot stop it")
	}
	if err := l.APIServer.Stop(10 * time.Second); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, with the same
// flags, and waits until it is ready. Each run logs to kube-apiserver-restart-N.log.
func (l *Lab) StartAPIServer(ctx context.Context) error {
	if l.Options.External != nil {
		return errors.New("the lab's API server is external (Options.External): it cannot start it")
	}
	l.apiServerRestarts++
	if err := l.startAPIServer(fmt.Sprintf("kube-apiserver-restart-%d", l.apiServerRestarts)); err != nil {
		return err
	}
	return l.waitAPIServerReady(ctx)
}

// waitReady polls check until it succeeds, the process exits or ReadyTimeout passes;
// failures carry the tail of the process's log. A nil p is the external API server
// (Options.External): no process of the lab's to watch.
func (l *Lab) waitReady(ctx context.Context, p *Process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.Options.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var exited <-chan struct{} // nil, never ready, without a process
	if p != nil {
		exited = p.Done()
	}
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%w) before ready; log tail:\n%s", p.Name, p.ExitReason(), p.LogTail(30))
		case <-ctx.Done():
			if p == nil {
				return fmt.Errorf("the external API server %s not ready from node1 after %s (last error: %w)", l.APIServerURL(), l.Options.ReadyTimeout, last)
			}
			return fmt.Errorf("%s not ready after %s (last error: %w); log tail:\n%s", p.Name, l.Options.ReadyTimeout, last, p.LogTail(30))
		case <-tick.C:
		}
	}
}

// GetOK GETs url with c and fails unless the answer is 200 OK (the error carries the body).
func GetOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// WriteServiceAccountKeys generates (in dir) the RSA key pair the API server signs and checks
// service-account tokens with.
func WriteServiceAccountKeys(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}
