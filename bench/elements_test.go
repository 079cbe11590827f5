package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/testing/roottest"
	"github.com/kproxy/kproxy/test/lab"
)

// TestServiceIPsCount counts a service-ips map of 5,000 elements, written by nft in
// a namespace of the test's own, and reports a missing table as an error.
func TestServiceIPsCount(t *testing.T) {
	roottest.Require(t, "creates a network namespace and writes a map in it with nft", "ip", "nft")
	name := fmt.Sprintf("kpbench-count-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	ns := lab.NewNS(name)
	t.Cleanup(func() {
		ns.Close()
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ctx := context.Background()
	if n, err := ServiceIPsCount(ctx, ns); err == nil {
		t.Fatalf("count without a table = %d, want an error", n)
	}

	const elements = 5000
	var script strings.Builder
	script.WriteString("add table ip kube-proxy\nadd chain ip kube-proxy svc\n")
	script.WriteString("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	script.WriteString("add set ip kube-proxy cluster-ips { type ipv4_addr ; }\n")
	for i := range elements {
		fmt.Fprintf(&script, "add element ip kube-proxy service-ips { 198.51.%d.%d . tcp . %d : goto svc }\n", i/250%256, i%250+1, 80+i/64000)
		fmt.Fprintf(&script, "add element ip kube-proxy cluster-ips { 203.0.%d.%d }\n", i/250%256, i%250+1)
	}
	cmd := exec.Command("ip", "netns", "exec", name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	n, err := ServiceIPsCount(ctx, ns)
	if err != nil || n != elements {
		t.Fatalf("ServiceIPsCount = %d, %v; want %d", n, err, elements)
	}
}
