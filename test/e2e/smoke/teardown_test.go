package smoke

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// TestTeardownLeavesNothing runs its own network-only lab with a tracked process and an
// untracked one, closes it and checks that no namespace or process survives.
func TestTeardownLeavesNothing(t *testing.T) {
	opts := lab.Options{SkipControlPlane: true, Node1Pods: 1, Node2Pods: 1}
	labtest.SkipUnlessAvailable(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := lab.New(opts)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tracked, err := l.StartProcess(l.Node1.NS, "sleeper", "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	untracked := l.Node2.Pods[0].NS.Command(context.Background(), "sleep", "600")
	if err := untracked.Start(); err != nil {
		t.Fatal(err)
	}
	// Its wait error is expected (killed by the teardown); only its exit is awaited.
	exited := make(chan struct{})
	go func() { _ = untracked.Wait(); close(exited) }()
	workDir := l.WorkDir

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.Leftovers(ctx); err != nil {
		t.Fatal(err)
	}
	if done, _ := tracked.Exited(); !done {
		t.Error("tracked process survived")
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Error("process started in a pod namespace survived teardown")
	}
	if _, err := os.Stat(workDir); !os.IsNotExist(err) {
		t.Errorf("work dir %s not removed: %v", workDir, err)
	}
}

// TestFailedStartCleansUp makes the control plane fail to start (a fake etcd exits at
// once) and checks that Start reports the log tail and tears down the network it built.
func TestFailedStartCleansUp(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := "#!/bin/sh\necho fake " + name + " refuses to start >&2\nexit 3\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := lab.Options{BinDir: bin, Node1Pods: 1, Node2Pods: 1}
	labtest.SkipUnlessAvailable(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := lab.New(opts)
	t.Cleanup(func() { _ = l.Close() })
	err := l.Start(ctx)
	if err == nil {
		t.Fatal("Start succeeded with a fake etcd")
	}
	if !strings.Contains(err.Error(), "fake etcd refuses to start") {
		t.Errorf("error lacks the log tail: %v", err)
	}
	if err := l.Leftovers(ctx); err != nil {
		t.Fatal(err)
	}
}
