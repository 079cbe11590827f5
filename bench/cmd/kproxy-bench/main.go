// Command kproxy-bench is `make bench`: it brings up the lab, loads Services once per
// size, runs kproxy and upstream kube-proxy v1.37.2 one after the other in node1, in
// each mode (nftables and iptables by default, both proxies in the same mode), then in
// ipvs mode in the test VM (Debian 12's 6.1 kernel under TCG, against the same API
// server and objects: bench.VMPlan), prints a table of absolute figures and
// kproxy/upstream ratios per mode (ratios only for the VM's), and writes it, with the
// machine's description, to bench/results/<UTC timestamp>.md (and into README.md
// between the bench markers, when present).
//
// Usage:
//
//	kproxy-bench [--modes nftables,iptables] [--services 1000,10000] [--with-30k]
//	             [--repeat N] [--cap 5m] [--scenarios sync,change,dataplane,rate,stateapi]
//	             [--changes 100] [--vm-modes ipvs] [--vm-services 1000] ...
//
// The binary is also the VM's agent (vm.IsAgent) and, with --vm-worker, the run in the
// VM (bench.RunInVM); neither is for direct use.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/vm"
)

func main() {
	vm.RunAgentIfAgent()
	klog.InitFlags(nil)
	services := flag.String("services", "1000,10000", "Service counts for the initial-sync scenario (each with 10 endpoints)")
	with30k := flag.Bool("with-30k", false, "also measure 30,000 Services (initial sync and dataplane)")
	repeat := flag.Int("repeat", 0, "initial-sync repetitions per size (0: 3 up to 10,000 Services, 1 above)")
	capDur := flag.Duration("cap", 5*time.Minute, "bound of one initial sync (reported as \"> cap\")")
	modes := flag.String("modes", strings.Join(bench.Modes, ","), "proxy modes to measure, each with both proxies")
	modeSizes := flag.String("mode-sizes", "iptables=1000", "per mode, the only Service counts measured there (mode=n,n;mode=n); its change latency is then measured at the largest. iptables-nft 1.8.9 takes minutes to restore a few thousand Services (upstream's and kproxy's alike, docs/iptables.md); \"\" measures every size in every mode")
	scenarios := flag.String("scenarios", "sync,change,dataplane,rate,stateapi", "scenarios to run")
	sample := flag.Int("sample", 50, "ClusterIPs probed by the initial-sync check")
	changeSize := flag.Int("change-services", 10000, "Service count at which change latency is measured")
	changes := flag.Int("changes", 100, "endpoint changes per proxy and minSyncPeriod")
	changeBound := flag.Duration("change-bound", bench.DefaultChangeBound, "bound of one change (one not seen by then is recorded at the bound)")
	gapDefault := flag.Duration("change-gap", 1100*time.Millisecond, "pause after a change took effect, minSyncPeriod 1s")
	gapZero := flag.Duration("change-gap-zero", 100*time.Millisecond, "pause after a change took effect, minSyncPeriod 0")
	dataplane := flag.String("dataplane-services", "0,1000,10000", "Service counts at which connect latency and connection rate are measured (30000 added by --with-30k; iptables mode only at its --mode-sizes)")
	connects := flag.Int("connects", 1000, "TCP connects per latency measurement")
	rateWorkers := flag.Int("rate-workers", 2, "concurrent connection loops of the rate measurement")
	rateDur := flag.Duration("rate-duration", 5*time.Second, "duration of each connection-rate measurement")
	loadWorkers := flag.Int("load-workers", 64, "concurrent API writers while loading")
	out := flag.String("out", "", "results directory (default <repo>/bench/results)")
	readme := flag.Bool("update-readme", true, "write the table into README.md between the bench markers")
	kproxyBin := flag.String("kproxy", "", "kproxy binary (default <repo>/_output/bin/kube-proxy)")
	upstreamBin := flag.String("upstream", "", "upstream binary (default <repo>/_output/bin/kube-proxy-upstream)")
	heap := flag.Bool("heap-profiles", true, "save each proxy's in-use heap profile after its first initial sync at each size, beside the results (<timestamp>-heap/)")
	keep := flag.Bool("keep-workdir", false, "keep the lab's work directory (proxy logs)")
	vmModes := flag.String("vm-modes", strings.Join(bench.VMModes, ","), "modes measured in the test VM (Debian 12's 6.1 kernel under TCG; ratios only); \"\" skips the VM")
	vmSizes := flag.String("vm-services", "1000", "Service counts whose initial sync is measured in the VM")
	vmChangeSize := flag.Int("vm-change-services", 250, "Service count of the VM's change series (upstream's ipvs syncs take about 40 s at 1,000 under TCG, longer than a change's 30 s bound)")
	vmRepeat := flag.Int("vm-repeat", 3, "initial-sync repetitions per proxy in the VM")
	vmChangeBound := flag.Duration("vm-change-bound", 2*time.Minute, "bound of one change in the VM")
	vmChanges := flag.Int("vm-changes", 10, "endpoint changes per proxy in the VM (upstream's ipvs mode takes 8-17 s a change there at 250 Services, each a full sync: its p99 is then its slowest)")
	vmTimeout := flag.Duration("vm-timeout", 15*time.Minute, "bound of one VM run (one mode at one size)")
	vmWorker := flag.Bool("vm-worker", false, "internal: be the run in the VM (started by the host's kproxy-bench)")
	flag.Parse()

	known := bench.Modes
	if *vmWorker {
		known = bench.VMModes
	}
	modeList, err := parseModes(*modes, known)
	if err != nil && !(*modes == "" && *vmModes != "") {
		fatal(err)
	}
	vmModeList, err := parseModes(*vmModes, bench.VMModes)
	if err != nil && *vmModes != "" {
		fatal(err)
	}
	perMode, err := parseModeSizes(*modeSizes)
	if err != nil {
		fatal(err)
	}
	sizes, err := parseInts(*services)
	if err != nil {
		fatal(err)
	}
	dpSizes, err := parseInts(*dataplane)
	if err != nil {
		fatal(err)
	}
	if *with30k {
		sizes = append(sizes, 30000)
		dpSizes = append(dpSizes, 30000)
	}
	if *vmWorker {
		cfg := bench.Config{
			Proxies: []bench.Proxy{{Name: "kproxy", Bin: *kproxyBin}, {Name: "upstream", Bin: *upstreamBin}},
			Modes:   modeList, Sizes: sizes, Scenarios: strings.Split(*scenarios, ","), Repeat: *repeat,
			Cap: *capDur, SampleSize: *sample, ChangeSize: *changeSize, Changes: *changes, ChangeBound: *changeBound,
			GapDefault: *gapDefault, GapZero: *gapZero, LoadWorkers: *loadWorkers,
		}
		if err := runWorker(cfg); err != nil {
			fatal(err)
		}
		return
	}
	binDir, err := lab.ResolveBinDir("")
	if err != nil {
		fatal(err)
	}
	root := filepath.Dir(filepath.Dir(binDir))
	if *kproxyBin == "" {
		*kproxyBin = filepath.Join(binDir, "kube-proxy")
	}
	if *upstreamBin == "" {
		*upstreamBin = filepath.Join(binDir, "kube-proxy-upstream")
	}
	if *out == "" {
		*out = filepath.Join(root, "bench", "results")
	}
	for _, b := range []string{*kproxyBin, *upstreamBin} {
		if _, err := os.Stat(b); err != nil {
			fatal(fmt.Errorf("missing %s (run `make setup`): %w", b, err))
		}
	}
	cfg := bench.Config{
		Proxies:        []bench.Proxy{{Name: "kproxy", Bin: *kproxyBin}, {Name: "upstream", Bin: *upstreamBin}},
		Modes:          modeList,
		ModeSizes:      perMode,
		Sizes:          sizes,
		Scenarios:      strings.Split(*scenarios, ","),
		Repeat:         *repeat,
		Cap:            *capDur,
		SampleSize:     *sample,
		ChangeSize:     *changeSize,
		Changes:        *changes,
		ChangeBound:    *changeBound,
		GapDefault:     *gapDefault,
		GapZero:        *gapZero,
		DataplaneSizes: dpSizes,
		Connects:       *connects,
		RateWorkers:    *rateWorkers,
		RateDuration:   *rateDur,
		LoadWorkers:    *loadWorkers,
	}
	if cfg.Has(bench.ScenarioChange) && !contains(sizes, cfg.ChangeSize) && !contains(dpSizes, cfg.ChangeSize) {
		cfg.Sizes = append(cfg.Sizes, cfg.ChangeSize)
	}
	if *heap {
		cfg.HeapProfileDir = *out
	}
	var vmHost *bench.VMHost
	if len(vmModeList) > 0 {
		vmSizeList, err := parseInts(*vmSizes)
		if err != nil || len(vmSizeList) == 0 {
			fatal(fmt.Errorf("--vm-services %q: want counts", *vmSizes))
		}
		cfg.VM = &bench.VMPlan{Modes: vmModeList, Sizes: vmSizeList, ChangeSize: *vmChangeSize, ChangeBound: *vmChangeBound, Repeat: *vmRepeat, Changes: *vmChanges, Timeout: *vmTimeout}
		if vmHost, err = newVMHost(root, *vmTimeout); err != nil {
			fatal(fmt.Errorf("%w (or skip the VM with --vm-modes \"\", make bench BENCH_VM=0)", err))
		}
	}
	if err := run(cfg, vmHost, *keep, *out, *readme, filepath.Join(root, "README.md")); err != nil {
		fatal(err)
	}
}

func run(cfg bench.Config, vmHost *bench.VMHost, keep bool, outDir string, updateReadme bool, readmePath string) (err error) {
	opts := bench.LabOptions(keep)
	if err := lab.Preflight(opts); err != nil {
		return err
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	l := lab.New(opts)
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", cerr))
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.Start(startCtx); err != nil {
		return err
	}
	fmt.Printf("lab %s up in %s; work dir %s\n", l.ID, l.StartDuration.Round(time.Millisecond), l.WorkDir)
	if contains(cfg.Modes, bench.ModeIPTables) {
		if err := bench.CheckIPTablesBackend(ctx, l); err != nil {
			return err
		}
	}

	rn := bench.NewRunner(l, cfg)
	if vmHost != nil {
		vmHost.Lab = l
		rn.VM = vmHost
	}
	res, runErr := rn.Run(ctx)
	if res == nil {
		return runErr
	}
	report := res.Markdown(bench.Machine(context.Background()), "kproxy-bench "+strings.Join(os.Args[1:], " "))
	if runErr != nil {
		report += fmt.Sprintf("\nThe run stopped early: %v\n", runErr)
	}
	fmt.Println()
	fmt.Println(report)
	path, err := bench.WriteResults(outDir, res.Started, report)
	if err != nil {
		return err
	}
	if err := bench.WriteJSON(path, res); err != nil {
		return err
	}
	fmt.Println("written to", path, "(raw figures beside it, .json)")
	if updateReadme && runErr == nil {
		if ok, err := bench.UpdateReadme(readmePath, report); err != nil {
			return err
		} else if ok {
			fmt.Println("README.md updated")
		}
	}
	return runErr
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseModeSizes parses "mode=n,n;mode=n".
func parseModeSizes(s string) (map[string][]int, error) {
	out := map[string][]int{}
	for _, entry := range strings.Split(s, ";") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		mode, list, ok := strings.Cut(entry, "=")
		if !ok || !contains(bench.Modes, mode) {
			return nil, fmt.Errorf("bad --mode-sizes entry %q (want mode=n,n with mode one of %s)", entry, strings.Join(bench.Modes, ", "))
		}
		sizes, err := parseInts(list)
		if err != nil {
			return nil, fmt.Errorf("--mode-sizes %s: %w", mode, err)
		}
		out[mode] = sizes
	}
	return out, nil
}

func parseModes(s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !contains(known, f) {
			return nil, fmt.Errorf("unknown mode %q here (known: %s)", f, strings.Join(known, ", "))
		}
		if !contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mode given")
	}
	return out, nil
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "kproxy-bench:", err)
	os.Exit(1)
}
