package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// startWatch runs watchFile on path in the background; ignored receives every event
// it ignored, done its result. The watch is known to be in place once it reported an
// ignored event, so each test first causes one (awaitIgnored repeats the action).
func startWatch(t *testing.T, ctx context.Context, path string) (ignored chan fsnotify.Event, done chan error) {
	t.Helper()
	ignored = make(chan fsnotify.Event, 16)
	done = make(chan error, 1)
	go func() {
		done <- watchFile(ctx, path, func(ev fsnotify.Event) {
			select {
			case ignored <- ev:
			default: // never block the watch on a test that stopped reading
			}
		})
	}()
	return ignored, done
}

// awaitIgnored waits for an ignored event with op, failing if the watch ended first.
func awaitIgnored(t *testing.T, ctx context.Context, ignored chan fsnotify.Event, done chan error, op fsnotify.Op, poke func()) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev := <-ignored:
			if ev.Has(op) {
				return
			}
		case err := <-done:
			t.Fatalf("the watch ended (%v) while waiting for an ignored %s event", err, op)
		case <-ctx.Done():
			t.Fatalf("no ignored %s event within the deadline", op)
		case <-tick.C:
			// The watch may not be in place yet: repeat the action until it is seen.
			poke()
		}
	}
}

// awaitChanged waits for the watch to end with ErrConfigFileChanged.
func awaitChanged(t *testing.T, ctx context.Context, done chan error, poke func()) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if !errors.Is(err, ErrConfigFileChanged) {
				t.Fatalf("watch ended with %v, want ErrConfigFileChanged", err)
			}
			return
		case <-ctx.Done():
			t.Fatal("the change was not noticed within the deadline")
		case <-tick.C:
			poke()
		}
	}
}

func TestWatchFileWriteEndsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ignored, done := startWatch(t, ctx, path)
	mode := os.FileMode(0o600)
	// A chmod is ignored, as upstream...
	awaitIgnored(t, ctx, ignored, done, fsnotify.Chmod, func() {
		mode ^= 0o040
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	})
	// ...and a write ends the watch.
	content := []byte("a")
	awaitChanged(t, ctx, done, func() {
		content = append(content, 'b')
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWatchFileRenameEndsIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ignored, done := startWatch(t, ctx, path)
	mode := os.FileMode(0o600)
	awaitIgnored(t, ctx, ignored, done, fsnotify.Chmod, func() {
		mode ^= 0o040
		_ = os.Chmod(path, mode)
	})
	renamed := false
	awaitChanged(t, ctx, done, func() {
		if !renamed {
			renamed = os.Rename(path, filepath.Join(dir, "moved.yaml")) == nil
		}
	})
}

// TestWatchFileKubeletSwapIsIgnored makes the atomic swap kubelet makes when a
// ConfigMap volume changes: config.yaml -> ..data/config.yaml, ..data -> ..v1; then a
// new ..v2, ..data renamed over, ..v1 removed. Upstream's watch sees the removal of
// the file it follows and ignores it; the proxy keeps running on the old config.
func TestWatchFileKubeletSwapIsIgnored(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	writeVersion := func(name, content string) {
		must(os.Mkdir(filepath.Join(dir, name), 0o755))
		must(os.WriteFile(filepath.Join(dir, name, "config.yaml"), []byte(content), 0o644))
	}
	writeVersion("..v1", "a")
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(dir, "config.yaml")))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ignored, done := startWatch(t, ctx, filepath.Join(dir, "config.yaml"))
	mode := os.FileMode(0o644)
	awaitIgnored(t, ctx, ignored, done, fsnotify.Chmod, func() {
		mode ^= 0o040
		_ = os.Chmod(filepath.Join(dir, "..v1", "config.yaml"), mode)
	})

	writeVersion("..v2", "b")
	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..v1")))
	awaitIgnored(t, ctx, ignored, done, fsnotify.Remove, func() {})
	select {
	case err := <-done:
		t.Fatalf("the swap ended the watch: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch after cancel = %v", err)
	}
}
