package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWatchFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- WatchFile(ctx, path, 10*time.Millisecond) }()
	// The watcher's first stat races with our writes, so keep growing the
	// file until the change is noticed (bounded by ctx).
	content := []byte("a")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			if !errors.Is(err, ErrConfigFileChanged) {
				t.Errorf("WatchFile = %v", err)
			}
			break wait
		case <-ctx.Done():
			t.Fatal("change not noticed within 10s")
		case <-tick.C:
			content = append(content, 'b')
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	stopped, stop := context.WithCancel(context.Background())
	go func() { done <- WatchFile(stopped, path, 10*time.Millisecond) }()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchFile after cancel = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchFile did not return after cancel")
	}
}
