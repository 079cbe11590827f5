package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/cluster"
	"github.com/kproxy/kproxy/test/cluster/takeover"
)

// TestTakeover: in each mode, upstream kube-proxy runs as the DaemonSet; its image is
// changed to kproxy's and back (rolling updates) under continuous probes: no probe may
// fail and no outage may exceed a second.
func TestTakeover(t *testing.T) {
	c := clusterFor(t)
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := c.UseProxy(ctx, cluster.UpstreamProxyImage, cluster.ProxyConfig{Mode: mode}); err != nil {
				t.Fatal(err)
			}
			res, err := takeover.Run(ctx, c, takeover.Options{
				Images:    []string{cluster.KproxyImage, cluster.UpstreamProxyImage},
				ProberBin: filepath.Join(options().BinDir, "kproxy-prober"),
				Label:     mode,
			})
			var b strings.Builder
			_ = res.WriteMarkdown(&b, takeover.MaxOutage)
			t.Logf("takeover in %s mode:\n%s", mode, b.String())
			if err != nil {
				t.Fatal(err)
			}
			if f := res.Failures(takeover.MaxOutage); len(f) > 0 {
				t.Errorf("takeover in %s mode:\n%s", mode, strings.Join(f, "\n"))
			}
		})
	}
}
