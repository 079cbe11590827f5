package nftables

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nftnetlink"
	"github.com/kproxy/kproxy/internal/testing/roottest"
	"github.com/kproxy/kproxy/internal/trace"
	"github.com/kproxy/kproxy/internal/trace/live"
	"github.com/kproxy/kproxy/internal/trace/nfttrace"
)

// checkKernelTraces is the check of `kube-proxy trace`'s reading of the kernel:
// the ruleset of fake is written into a private network namespace by each of
// kproxy's writers (netlink, the default, and nft -f), listed back with `nft list
// table` and loaded as kube-proxy trace loads it (live.Load); every packet of tests
// must then have the same outcomes (verdict, DNAT target, probability,
// masquerade) as when traced through fake. It needs root (skipped otherwise).
func checkKernelTraces(t *testing.T, fake *knftables.Fake, tests []flowTest, local []string) {
	t.Helper()
	t.Run("kernel", func(t *testing.T) {
		roottest.Require(t, "writes the ruleset into a private network namespace and lists it back", "nft", "ip")
		want, err := nfttrace.New(fake, local)
		if err != nil {
			t.Fatal(err)
		}
		fake.RLock()
		family := knftables.IPv4Family
		if fake.Tables[knftables.IPv6Family] != nil {
			family = knftables.IPv6Family
		}
		script := fake.Dump()
		fake.RUnlock()
		for _, writer := range []string{"netlink", "nft"} {
			t.Run(writer, func(t *testing.T) {
				listing := writeAndList(t, family, writer, script)
				fam, addrs := v1.IPv4Protocol, map[v1.IPFamily][]netip.Addr{}
				if family == knftables.IPv6Family {
					fam = v1.IPv6Protocol
				}
				for _, a := range local {
					addrs[fam] = append(addrs[fam], netip.MustParseAddr(a))
				}
				reader := &live.Fake{Listings: map[string]string{string(family) + " " + TableName: listing}, Addresses: addrs}
				got, err := live.Load(context.Background(), reader, "nftables", fam)
				if err != nil {
					t.Fatalf("loading the kernel's listing: %v\n%s", err, listing)
				}
				for _, tc := range tests {
					p := flowPacket(tc)
					a, errA := want.Trace(p)
					b, errB := got.Trace(p)
					if errA != nil || errB != nil {
						t.Fatalf("%s: tracing the rendered rules: %v; the kernel's listing: %v", tc.name, errA, errB)
					}
					if x, y := outcomeSummary(a), outcomeSummary(b); x != y {
						t.Errorf("%s: the kernel's listing traces differently:\nrendered: %s\nkernel:   %s\n--- rendered\n%s\n--- kernel\n%s\n--- listing\n%s",
							tc.name, x, y, a.TraceString(), b.TraceString(), listing)
					}
				}
			})
		}
	})
}

// outcomeSummary is the outcomes of r that do not depend on how the rules are
// spelled, sorted.
func outcomeSummary(r *trace.Result) string {
	var out []string
	for _, o := range r.Outcomes {
		out = append(out, fmt.Sprintf("%s dnat=%s snat=%s masq=%v p=%.4f", o.Verdict, o.DNAT, o.SNAT, o.Masquerade, o.Probability))
	}
	slices.Sort(out)
	return string(r.Verdict) + ": " + strings.Join(out, "; ")
}

// writeAndList writes script into a new network namespace with writer and
// returns `nft list table` of it; the namespace is deleted with the test.
func writeAndList(t *testing.T, family knftables.Family, writer, script string) string {
	t.Helper()
	var r [4]byte
	_, _ = rand.Read(r[:])
	ns := "kpn-trace-" + hex.EncodeToString(r[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	ctx := context.Background()
	switch writer {
	case "netlink":
		ex, err := nftnetlink.New(family, TableName, nftnetlink.Options{NetNSPath: filepath.Join("/run/netns", ns)})
		if err != nil {
			t.Fatal(err)
		}
		if err := ex.RunScript(ctx, slices.Values([]string{script})); err != nil {
			t.Fatalf("netlink writer: %v\n%s", err, script)
		}
	default:
		path := filepath.Join(t.TempDir(), "ruleset.nft")
		if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("nft -f: %v\n%s", err, out)
		}
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "list", "table", string(family), TableName).Output()
	if err != nil {
		t.Fatalf("nft list table: %v", err)
	}
	return string(out)
}
