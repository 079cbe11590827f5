package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

// heapProfileURL is the in-use heap profile of a proxy started by Start: both proxies
// run with profiling enabled (upstream's enableProfiling, served on the metrics
// address), which only adds HTTP handlers and changes nothing that is measured.
const heapProfileURL = "http://127.0.0.1:10249/debug/pprof/heap"

// profilingConfig and profilingFlag enable the handlers, in the configuration file
// and in the flags-only runs.
const (
	profilingConfig = "enableProfiling: true\n"
	profilingFlag   = "--profiling=true"
)

// SaveHeapProfile writes the in-use heap profile of r, fetched from inside node1,
// to dir/<mode>-<n>-<proxy>-heap.pb.gz and returns the path. The profile is taken
// after a collection (gc=1), so it shows what the proxy holds, not its garbage:
// `go tool pprof -sample_index=inuse_space -top <binary> <file>` reads it.
func SaveHeapProfile(ctx context.Context, l *lab.Lab, r *Running, n int, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: l.Node1.NS.Dial}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, heapProfileURL+"?gc=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("heap profile of %s: %w", r.Proxy.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("heap profile of %s: HTTP %s", r.Proxy.Name, resp.Status)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-%s-heap.pb.gz", r.Mode, n, r.Proxy.Name))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("heap profile of %s: %w", r.Proxy.Name, err)
	}
	return path, f.Close()
}
