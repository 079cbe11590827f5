package nftables

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
)

// echoServer answers every line of a TCP connection with "<identity> <line>", on
// port in ns, until t ends. Unlike the lab's backends it keeps connections open.
func echoServer(ctx context.Context, t *testing.T, ns *lab.NS, identity string, port int) {
	t.Helper()
	ln, err := ns.Listen(ctx, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatalf("echo server in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, identity+" "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// roundTrip writes msg on c and reads the echoed line within a bound.
func roundTrip(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestLifecycle: another program's nftables table and iptables chains survive syncs
// and restarts; restarting the proxy keeps established TCP connections through a
// ClusterIP working; the `--cleanup` command removes everything of both modes (the
// nftables tables, the iptables chains and jumps) and nothing else; `--init-only`
// exits 0.
func TestLifecycle(t *testing.T) {
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 150*time.Second)
	addOtherSoftware(ctx, t, l)

	// The lab's backends close after one reply, so the long-lived connection goes to
	// an echo server of the test's own on port 9090 of node2-pod1.
	const echoPort = 9090
	backend := l.Node2.Pods[0]
	echoServer(ctx, t, backend.NS, "echo", echoPort)
	svc := createService(ctx, t, l, "lifecycle", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{svcPort("echo", v1.ProtocolTCP, 80, echoPort)}
	}, lab.PodEndpoints(backend), nil)
	client := l.Node1.Pods[0].NS
	conns := map[v1.IPFamily]net.Conn{}
	for _, fam := range lab.Families {
		to := netip.AddrPortFrom(clusterIP(t, svc, fam), 80)
		err := p.WaitFor(ctx, "a TCP connection to "+to.String()+" echoing", syncTimeout, func(ctx context.Context) error {
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			c, err := client.Dial(dctx, "tcp", to.String())
			if err != nil {
				return err
			}
			got, err := roundTrip(c, "before")
			if err == nil && got != "echo before" {
				err = fmt.Errorf("got %q", got)
			}
			if err != nil {
				c.Close()
				return fmt.Errorf("echo: %w", err)
			}
			conns[fam] = c
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer conns[fam].Close()
	}
	checkOtherSoftware(ctx, t, l, "after a sync")

	t.Run("restart-keeps-connections", func(t *testing.T) {
		p := restartProxy(t)
		// A new Service is programmed by the restarted proxy...
		fresh := createService(ctx, t, l, "lifecycle-after", nil, lab.PodEndpoints(l.Node2.Pods[1]), nil)
		for _, fam := range lab.Families {
			waitAnswered(ctx, t, p, client, v1.ProtocolTCP, netip.AddrPortFrom(clusterIP(t, fresh, fam), 80), nil)
			// ...and the connection opened before the restart still works.
			if got, err := roundTrip(conns[fam], "after"); err != nil || got != "echo after" {
				t.Errorf("%s connection opened before the restart: echo %q, %v; want \"echo after\"\n%s", fam, got, err, dumpRules(p))
			}
		}
		checkOtherSoftware(ctx, t, l, "after a restart")
	})

	t.Run("cleanup", func(t *testing.T) {
		p := sharedProxy(t)
		// Not vacuous: the running mode's rules are there before.
		if err := modeState(ctx, l, proxyMode()); err != nil {
			t.Fatalf("before --cleanup: %v\n%s", err, dumpRules(p))
		}
		if err := p.Process.Stop(3 * time.Second); err != nil {
			t.Fatalf("stopping the proxy: %v", err)
		}
		t.Cleanup(func() { restoreSharedProxy(t) })
		out, err := runProxyCommand(ctx, l, p, "--cleanup")
		if err != nil {
			t.Fatalf("kube-proxy --cleanup: %v\n%s", err, out)
		}
		if err := noProxyState(ctx, l); err != nil {
			t.Errorf("after --cleanup: %v\n%s", err, dumpRules(p))
		}
		checkOtherSoftware(ctx, t, l, "after --cleanup")
	})

	t.Run("init-only", func(t *testing.T) {
		p := sharedProxy(t)
		out, err := runProxyCommand(ctx, l, p, "--init-only")
		if err != nil {
			t.Fatalf("kube-proxy --init-only: %v, want exit 0\n%s", err, out)
		}
	})
}

// runProxyCommand runs the proxy binary once in node1 with p's configuration and
// extra arguments, bounded to 60s.
func runProxyCommand(ctx context.Context, l *lab.Lab, p *proxytest.Proxy, args ...string) (string, error) {
	bin, err := proxytest.Binary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := l.Node1.NS.Command(ctx, bin, append([]string{"--config=" + p.ConfigPath, "-v=2"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if ctx.Err() != nil && err != nil && !errors.As(err, &ee) {
		return string(out), fmt.Errorf("%w (bound: 60s)", err)
	}
	return string(out), err
}

// restoreSharedProxy starts a shared proxy with the default options again.
func restoreSharedProxy(t *testing.T) {
	p, err := startHealthy(suite.Lab(t), defaultOptions())
	proxyMu.Lock()
	proxy, proxyErr = p, err
	proxyMu.Unlock()
	if err != nil {
		t.Errorf("restoring the shared proxy: %v", err)
	}
}
