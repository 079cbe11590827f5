package nftnetlink

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// nftTimed runs `nft -f file` directly inside the namespace (forked from a thread
// that entered it, so no `ip netns exec` overhead is counted) and returns its
// wall time.
func nftTimed(t *testing.T, ns, script string) time.Duration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tx.nft")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: the runtime discards it with the goroutine.
			runtime.LockOSThread()
			t.Errorf("return to namespace: %v", err)
		}
	}()
	start := time.Now()
	out, err := exec.Command("nft", "-f", path).CombinedOutput()
	d := time.Since(start)
	if err != nil {
		t.Fatalf("nft -f: %v\n%s", err, out)
	}
	return d
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func stats(ds []time.Duration) string {
	return fmt.Sprintf("p50 %v p99 %v max %v", percentile(ds, 0.5).Round(10*time.Microsecond),
		percentile(ds, 0.99).Round(10*time.Microsecond), slices.Max(ds).Round(10*time.Microsecond))
}

// TestKernelTiming10k compares nft -f and the executor on a full sync of 10,000
// Services x 10 endpoints and on one-change deltas on top of it. Opt-in
// (KPROXY_KERNEL_TIMING=1): it takes tens of seconds and measures the machine.
func TestKernelTiming10k(t *testing.T) {
	if os.Getenv("KPROXY_KERNEL_TIMING") == "" {
		t.Skip("set KPROXY_KERNEL_TIMING=1 to run")
	}
	needRoot(t)
	const reps = 20
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	st := renderState(cfg, views)
	nsNft, nsNl := testNetns(t), testNetns(t)
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsNl)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	full := ex.NewTransaction()
	render.WriteFull(full, st)
	text := full.String()
	dNft := nftTimed(t, nsNft, text)
	start := time.Now()
	if err := ex.Run(ctx, full); err != nil {
		t.Fatal(err)
	}
	dNl := time.Since(start)
	// Where the executor's time goes: text to batch, then the kernel.
	start = time.Now()
	b, err := ex.build(slices.Values([]string{text}), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	dBuild := time.Since(start)
	t.Logf("full sync: %d operations, %d bytes of nft text, %d bytes of netlink", full.NumOperations(), len(text), b.size())
	t.Logf("full sync: nft -f %v, netlink %v (of which building the batch %v)", dNft.Round(time.Millisecond), dNl.Round(time.Millisecond), dBuild.Round(time.Millisecond))

	// Full sync again on top (delete + re-add of the whole table in one batch).
	dNft2 := nftTimed(t, nsNft, text)
	start = time.Now()
	if err := ex.Run(ctx, full); err != nil {
		t.Fatal(err)
	}
	t.Logf("full resync over the existing table: nft -f %v, netlink %v", dNft2.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	measure := func(name string, updates func(i int) map[model.ServicePortName]*render.Fragment) {
		var nftTimes, nlTimes, buildTimes, kernelTimes []time.Duration
		ops := 0
		for i := range reps {
			tx := ex.NewTransaction()
			p := st.Plan(tx, nil, updates(i), render.PlanOptions{})
			ops = tx.NumOperations()
			nftTimes = append(nftTimes, nftTimed(t, nsNft, tx.String()))
			start := time.Now()
			sock, err := openSocket(ex.opts.NetNSPath)
			if err != nil {
				t.Fatal(err)
			}
			texts := oneText(tx.String())
			b, err := ex.build(texts, sock, true)
			if err != nil {
				t.Fatal(err)
			}
			built := time.Now()
			if err := sock.sendBuffers(b.buffers()); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			if err := collectErrors(sock, b, func(r commandRef) string { return commandAt(texts, r) }); err != nil {
				t.Fatal(err)
			}
			sock.close()
			nlTimes = append(nlTimes, time.Since(start))
			buildTimes = append(buildTimes, built.Sub(start))
			kernelTimes = append(kernelTimes, sent.Sub(built))
			st.Commit(p)
		}
		t.Logf("%s (%d operations, %d reps): nft -f %s; netlink %s (socket+build %s; sendmsg, i.e. kernel %s)",
			name, ops, reps, stats(nftTimes), stats(nlTimes), stats(buildTimes), stats(kernelTimes))
	}
	measure("one endpoint changed", func(i int) map[model.ServicePortName]*render.Fragment {
		orig := views[1001+i]
		eps := append([]*model.Endpoint{ep(fmt.Sprintf("10.250.0.%d", i+1), 8080, false)}, orig.ClusterEndpoints[1:]...)
		return map[model.ServicePortName]*render.Fragment{orig.Name: fragment(cfg, view(orig.ServicePort, eps...))}
	})
	measure("one Service added", func(i int) map[model.ServicePortName]*render.Fragment {
		v := scaleView(20001+i, 10)
		return map[model.ServicePortName]*render.Fragment{v.Name: fragment(cfg, v)}
	})

	// Both paths must still agree.
	a, _ := nftIn(nsNft, "", "list", "table", "ip", render.TableName)
	bb, _ := nftIn(nsNl, "", "list", "table", "ip", render.TableName)
	if sortElements(a) != sortElements(bb) {
		t.Errorf("listings differ after the timing run")
	}

	// Which part of a delta costs the kernel time: elements without verdicts, rules
	// without jumps, or verdicts (which make the kernel re-validate the table's
	// jump graph).
	probes := []struct{ name, text string }{
		{"set element (no verdict)", "add element ip kube-proxy cluster-ips { 172.31.%d.1 }\n"},
		{"flush chain + dnat rule (no jump)", "flush chain ip kube-proxy endpoint-probe\nadd rule ip kube-proxy endpoint-probe meta l4proto tcp dnat to 10.251.0.%d:80\n"},
		{"map element with goto", "add element ip kube-proxy service-ips { 172.31.%d.2 . tcp . 80 : goto endpoint-probe }\n"},
		{"rule with jump", "add rule ip kube-proxy endpoint-probe2 ip saddr 10.9.9.%d jump endpoint-probe\n"},
	}
	if err := ex.apply(ctx, oneText("add chain ip kube-proxy endpoint-probe\nadd chain ip kube-proxy endpoint-probe2\n"), true); err != nil {
		t.Fatal(err)
	}
	for _, p := range probes {
		var ds []time.Duration
		for i := range reps {
			start := time.Now()
			if err := ex.apply(ctx, oneText(fmt.Sprintf(p.text, i+1)), true); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		t.Logf("netlink probe %s: %s", p.name, stats(ds))
	}
	if err := ex.apply(ctx, oneText("flush chain ip kube-proxy endpoint-probe2\ndelete chain ip kube-proxy endpoint-probe2\n"), true); err != nil {
		t.Fatal(err)
	}
}
