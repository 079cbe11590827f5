package config

import (
	"context"
	"errors"
	"os"
	"time"
)

// ErrConfigFileChanged is returned by WatchFile when the file changed; upstream
// kube-proxy exits in that case so that it is restarted with the new file.
var ErrConfigFileChanged = errors.New("content of the proxy server's configuration file was updated")

// WatchFile polls path every interval until ctx is done (returning nil) or the
// file is written, replaced or removed (returning ErrConfigFileChanged, or an
// error wrapping it).
func WatchFile(ctx context.Context, path string, interval time.Duration) error {
	initial, err := os.Stat(path)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		current, err := os.Stat(path)
		if err != nil || !os.SameFile(initial, current) ||
			current.Size() != initial.Size() || !current.ModTime().Equal(initial.ModTime()) {
			return ErrConfigFileChanged
		}
	}
}
