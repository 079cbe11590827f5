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
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// nftTimed runs `nft -f file` directly inside the namespace (forked from a thread
// that entered it, so no `ip netns exec` overhead is counted) and returns its
// wall time.
func nftTimed(tb testing.TB, ns, script string) time.Duration {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tx.nft")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		tb.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		tb.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		tb.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: the runtime discards it with the goroutine.
			runtime.LockOSThread()
			tb.Errorf("return to namespace: %v", err)
		}
	}()
	start := time.Now()
	out, err := exec.Command("nft", "-f", path).CombinedOutput()
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("nft -f: %v\n%s", err, out)
	}
	return d
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ms is d in milliseconds, the unit of the kernel benchmarks' custom metrics: their
// figures are tens of microseconds to seconds, and docs/nftables.md quotes them so.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportPercentiles reports the p50 and p99 of ds as the metrics NAME-p50-ms and
// NAME-p99-ms: one change's cost varies with what the kernel does meanwhile, so a
// mean (ns/op) would hide the tail that the sync latency target is about.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(ms(percentile(ds, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(percentile(ds, 0.99)), name+"-p99-ms")
}

// BenchmarkKernelTiming10k compares nft -f and the executor on a full sync of 10,000
// Services x 10 endpoints and on one-change deltas on top of it. One iteration is the
// whole experiment (tens of seconds; -benchtime 1x): ns/op is its wall time, and the
// metrics are its figures: full sync, full resync over the existing table, each delta
// kind's p50/p99 for nft -f and netlink (split into socket+build and sendmsg, i.e.
// kernel), and the netlink cost of single operations of each kind. It needs root: it
// programs two namespaces of its own.
func BenchmarkKernelTiming10k(b *testing.B) {
	needRoot(b)
	const reps = 20
	cfg := testConfig(knftables.IPv4Family)
	views := scaleViews(10000, 10)
	st := renderState(cfg, views)
	ctx := context.Background()
	for b.Loop() {
		nsNft, nsNl := testNetns(b), testNetns(b)
		ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(nsNl)})
		if err != nil {
			b.Fatal(err)
		}
		full := ex.NewTransaction()
		render.WriteFull(full, st)
		text := full.String()
		dNft := nftTimed(b, nsNft, text)
		start := time.Now()
		if err := ex.Run(ctx, full); err != nil {
			b.Fatal(err)
		}
		dNl := time.Since(start)
		// Where the executor's time goes: text to batch, then the kernel.
		start = time.Now()
		batch, err := ex.build(slices.Values([]string{text}), nil, true)
		if err != nil {
			b.Fatal(err)
		}
		dBuild := time.Since(start)
		b.ReportMetric(float64(full.NumOperations()), "full-ops")
		b.ReportMetric(float64(len(text)), "full-nft-bytes")
		b.ReportMetric(float64(batch.size()), "full-netlink-bytes")
		b.ReportMetric(ms(dNft), "full-nft-ms")
		b.ReportMetric(ms(dNl), "full-netlink-ms")
		b.ReportMetric(ms(dBuild), "full-netlink-build-ms")

		// Full sync again on top (delete + re-add of the whole table in one batch).
		b.ReportMetric(ms(nftTimed(b, nsNft, text)), "resync-nft-ms")
		start = time.Now()
		if err := ex.Run(ctx, full); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(time.Since(start)), "resync-netlink-ms")

		measure := func(name string, updates func(i int) map[model.ServicePortName]*render.Fragment) {
			var nftTimes, nlTimes, buildTimes, kernelTimes []time.Duration
			ops := 0
			for i := range reps {
				p := st.Plan(nil, updates(i), render.PlanOptions{})
				ops = len(p.Ops)
				text := nft.AppendScript(nil, slices.Values(p.Ops), ex.nftFamily(), render.TableName)
				nftTimes = append(nftTimes, nftTimed(b, nsNft, string(text)))
				start := time.Now()
				sock, err := ex.openSocket()
				if err != nil {
					b.Fatal(err)
				}
				batch, err := ex.buildOps(slices.Values(p.Ops), sock, true)
				if err != nil {
					b.Fatal(err)
				}
				built := time.Now()
				if err := sock.sendBuffers(batch.b.buffers()); err != nil {
					b.Fatal(err)
				}
				sent := time.Now()
				if err := collectErrors(sock, batch.b, func(r commandRef) string { return ex.opAt(slices.Values(p.Ops), r.Line) }); err != nil {
					b.Fatal(err)
				}
				sock.close()
				nlTimes = append(nlTimes, time.Since(start))
				buildTimes = append(buildTimes, built.Sub(start))
				kernelTimes = append(kernelTimes, sent.Sub(built))
				st.Commit(p)
			}
			b.ReportMetric(float64(ops), name+"-ops")
			reportPercentiles(b, name+"-nft", nftTimes)
			reportPercentiles(b, name+"-netlink", nlTimes)
			reportPercentiles(b, name+"-netlink-build", buildTimes)
			reportPercentiles(b, name+"-netlink-kernel", kernelTimes)
		}
		measure("endpoint-changed", func(i int) map[model.ServicePortName]*render.Fragment {
			orig := views[1001+i]
			eps := append([]*model.Endpoint{ep(fmt.Sprintf("10.250.0.%d", i+1), 8080, false)}, orig.ClusterEndpoints[1:]...)
			return map[model.ServicePortName]*render.Fragment{orig.Name: fragment(cfg, view(orig.ServicePort, eps...))}
		})
		measure("service-added", func(i int) map[model.ServicePortName]*render.Fragment {
			v := scaleView(20001+i, 10)
			return map[model.ServicePortName]*render.Fragment{v.Name: fragment(cfg, v)}
		})

		// The two writers must still agree, or the comparison above compared different
		// work. (TestEquivalentToNftDeltas is the test of that; this guards the figures.)
		a, _ := nftIn(nsNft, "", "list", "table", "ip", render.TableName)
		bb, _ := nftIn(nsNl, "", "list", "table", "ip", render.TableName)
		if sortElements(a) != sortElements(bb) {
			b.Fatal("the nft and netlink namespaces' listings differ after the timing run")
		}

		// Which part of a delta costs the kernel time: elements without verdicts, rules
		// without jumps, or verdicts (which make the kernel re-validate the table's
		// jump graph).
		probes := []struct{ name, text string }{
			{"probe-set-element", "add element ip kube-proxy cluster-ips { 172.31.%d.1 }\n"},
			{"probe-flush-chain-dnat-rule", "flush chain ip kube-proxy endpoint-probe\nadd rule ip kube-proxy endpoint-probe meta l4proto tcp dnat to 10.251.0.%d:80\n"},
			{"probe-map-element-goto", "add element ip kube-proxy service-ips { 172.31.%d.2 . tcp . 80 : goto endpoint-probe }\n"},
			{"probe-rule-jump", "add rule ip kube-proxy endpoint-probe2 ip saddr 10.9.9.%d jump endpoint-probe\n"},
		}
		if err := ex.apply(ctx, oneText("add chain ip kube-proxy endpoint-probe\nadd chain ip kube-proxy endpoint-probe2\n"), true); err != nil {
			b.Fatal(err)
		}
		for _, p := range probes {
			reportPercentiles(b, p.name, timeApply(b, ex, reps, p.text))
		}
		if err := ex.apply(ctx, oneText("flush chain ip kube-proxy endpoint-probe2\ndelete chain ip kube-proxy endpoint-probe2\n"), true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKernelFullSync10k and BenchmarkKernelFullSync30k split the cost of a first
// full sync of 10,000 and 30,000 Services x 10 endpoints (endpoint maps, drift
// detection's inventory: the daemon's path) into
// the part in our code and the kernel's: "encode-ms" is the operations encoded and
// read into the inventory without a socket, "sync-ms" the same written to an empty
// table in a namespace of its own, and "sys-ms" and "user-ms" the process's CPU
// during that write (the kernel processes the batch in the writer's sendmsg, so its
// work is the process's system time). It needs root.
//
// The synthetic cluster of these two (NodePorts, LBs with source ranges, affinity on
// every 50th Service: 6,000 per-endpoint affinity sets at 30,000, which the kernel
// finds by name with a linear search) is not make bench's; BenchmarkKernelFullSyncPlain
// writes make bench's Services (ClusterIP only, rendertest.PlainViews).
func BenchmarkKernelFullSync10k(b *testing.B) { benchKernelFullSync(b, scaleViews(10000, 10)) }

func BenchmarkKernelFullSync30k(b *testing.B) { benchKernelFullSync(b, scaleViews(30000, 10)) }

// BenchmarkKernelFullSyncPlain is BenchmarkKernelFullSync10k's split for make bench's
// own Services at 10,000 and 30,000.
func BenchmarkKernelFullSyncPlain(b *testing.B) {
	for _, n := range []int{10000, 30000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchKernelFullSync(b, rendertest.PlainViews(n, 10)) })
	}
}

func benchKernelFullSync(b *testing.B, views []*model.ServicePortView) {
	needRoot(b)
	cfg := testConfig(knftables.IPv4Family)
	cfg.EndpointMaps = true
	st := renderState(cfg, views)
	for b.Loop() {
		ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(testNetns(b))})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := ex.InventoryOf(render.FullOps(st)); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(time.Since(start)), "encode-ms")
		var before, after unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := ex.RunOpsInventory(context.Background(), render.FullOps(st)); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(time.Since(start)), "sync-ms")
		if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(time.Duration(after.Stime.Nano()-before.Stime.Nano())), "sys-ms")
		b.ReportMetric(ms(time.Duration(after.Utime.Nano()-before.Utime.Nano())), "user-ms")
	}
}
