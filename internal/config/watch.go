package config

import (
	"context"
	"errors"
	"fmt"

	"github.com/fsnotify/fsnotify"
)

// ErrConfigFileChanged is returned by WatchFile when the file changed; upstream
// kube-proxy exits in that case so that it is restarted with the new file.
var ErrConfigFileChanged = errors.New("content of the proxy server's configuration file was updated")

// WatchFile watches the configuration file with inotify, as upstream does, until ctx
// is done (nil). It returns ErrConfigFileChanged when the file is written or renamed,
// and a watcher error as is; every other event is ignored, as upstream ignores it:
// a chmod, and the removal of the file. The watch follows the file, not the path, so
// the atomic swap kubelet makes when a ConfigMap changes (a new directory behind the
// ..data symlink, then the old one removed) shows as a removal and does not restart
// the proxy: upstream kube-proxy picks up an edited ConfigMap only when its pod is
// restarted, and so does kproxy (docs/configuration.md).
func WatchFile(ctx context.Context, path string) error {
	return watchFile(ctx, path, nil)
}

// watchFile is WatchFile; ignored, when set, is called with each ignored event (tests).
func watchFile(ctx context.Context, path string, ignored func(fsnotify.Event)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the configuration file: %w", err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(path); err != nil {
		return fmt.Errorf("watching the configuration file %s: %w", path, err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			return fmt.Errorf("watching the configuration file %s: %w", path, err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if endsProcess(ev) {
				return ErrConfigFileChanged
			}
			if ignored != nil {
				ignored(ev)
			}
		}
	}
}

// endsProcess is upstream's rule: a write or a rename of the file ends the process.
func endsProcess(ev fsnotify.Event) bool {
	return ev.Has(fsnotify.Write) || ev.Has(fsnotify.Rename)
}
