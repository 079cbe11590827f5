package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Machine describes where the run happened.
func Machine(ctx context.Context) string {
	kernel, _ := exec.CommandContext(ctx, "uname", "-r").Output()
	cpu, mem := "unknown", "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/1024/1024)
				}
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("kernel %s, CPU %s, %d cores, memory %s, load average at the end %s",
		strings.TrimSpace(string(kernel)), cpu, runtime.NumCPU(), mem, strings.Join(strings.Fields(string(load))[:3], " "))
}

type row struct{ mode, metric, size, a, b, ratio string }

func sizeName(n int) string {
	if n == 0 {
		return "0 (1 probed Service)"
	}
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func durSample(ds []time.Duration, p float64, capped bool) Sample {
	if len(ds) == 0 {
		return Sample{}
	}
	var s Sample
	s.Add(Percentile(Seconds(ds), p), capped)
	return s
}

// modes lists the modes with results, in the configured order.
func (r *Results) modes() []string {
	var out []string
	for _, m := range r.Config.Modes {
		if r.Figures[m] != nil {
			out = append(out, m)
		}
	}
	var rest []string
	for m := range r.Figures {
		if !slices.Contains(out, m) {
			rest = append(rest, m)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// Table renders the results as a Markdown table, one block of rows per mode.
func (r *Results) Table() string {
	a, b := r.Config.Proxies[0].Name, r.Config.Proxies[1].Name
	var rows []row
	for _, mode := range r.modes() {
		rows = append(rows, r.modeRows(mode, a, b)...)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "| mode | metric | Services | %s | %s | %s/%s |\n|---|---|---|---|---|---|\n", a, b, a, b)
	for _, rw := range rows {
		fmt.Fprintf(&buf, "| %s | %s | %s | %s | %s | %s |\n", rw.mode, rw.metric, rw.size, rw.a, rw.b, rw.ratio)
	}
	return buf.String()
}

// modeRows are the table rows of one mode.
func (r *Results) modeRows(mode, a, b string) []row {
	var rows []row
	figures := r.Figures[mode]
	sizes := make([]int, 0, len(figures))
	for s := range figures {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	label, ratioOnly := mode, r.inVM(mode)
	if ratioOnly {
		label = mode + " (6.1 VM, TCG: ratios only)"
	}
	add := func(metric string, size int, sa, sb Sample, unit func(float64) string) {
		if len(sa.Values) == 0 && len(sb.Values) == 0 {
			return
		}
		fa, fb := sa.Format(unit), sb.Format(unit)
		if ratioOnly {
			// Emulation decides the absolute figures; the .json keeps them.
			fa, fb = "(VM)", "(VM)"
		}
		rows = append(rows, row{label, metric, sizeName(size), fa, fb, Ratio(sa, sb)})
	}
	get := func(size int, name string) *Figures {
		if f := figures[size][name]; f != nil {
			return f
		}
		return &Figures{}
	}
	capNote := fmt.Sprintf(" (cap %s)", r.Config.Cap)
	for _, s := range sizes {
		fa, fb := get(s, a), get(s, b)
		add("initial sync, S×10 endpoints"+capNote, s, fa.Sync, fb.Sync, FmtSeconds)
		add("initial sync CPU (proxy + reaped children)", s, fa.CPU, fb.CPU, FmtCPU)
		add("peak RSS (VmHWM)", s, fa.RSS, fb.RSS, FmtMiB)
		add("steady RSS after the scenarios (VmRSS)", s, fa.SteadyRSS, fb.SteadyRSS, FmtMiB)
		rows = append(rows, stateAPIRows(label, sizeName(s), fa.StateAPI, fb.StateAPI)...)
	}
	for _, s := range sizes {
		fa, fb := get(s, a), get(s, b)
		for _, c := range []struct {
			name   string
			ca, cb *ChangeResult
		}{{"change latency, minSyncPeriod 1s (default)", fa.ChangeDefault, fb.ChangeDefault}, {"change latency, minSyncPeriod 0", fa.ChangeZero, fb.ChangeZero}} {
			for _, p := range []float64{50, 99} {
				var sa, sb Sample
				if c.ca != nil {
					sa = durSample(c.ca.Latencies, p, c.ca.Capped > 0 && p == 99)
				}
				if c.cb != nil {
					sb = durSample(c.cb.Latencies, p, c.cb.Capped > 0 && p == 99)
				}
				add(fmt.Sprintf("%s p%.0f", c.name, p), s, sa, sb, FmtSeconds)
			}
		}
	}
	for _, s := range sizes {
		fa, fb := get(s, a), get(s, b)
		for _, p := range []float64{50, 99} {
			var sa, sb, da, db Sample
			if fa.Latency != nil {
				sa, da = durSample(fa.Latency.ClusterIP, p, false), durSample(fa.Latency.Direct, p, false)
			}
			if fb.Latency != nil {
				sb, db = durSample(fb.Latency.ClusterIP, p, false), durSample(fb.Latency.Direct, p, false)
			}
			add(fmt.Sprintf("TCP connect via ClusterIP p%.0f", p), s, sa, sb, FmtSeconds)
			add(fmt.Sprintf("TCP connect direct to pod p%.0f (same run)", p), s, da, db, FmtSeconds)
			add(fmt.Sprintf("TCP connect p%.0f, ClusterIP ÷ direct (noise-robust)", p), s, quotient(sa, da), quotient(sb, db), FmtFactor)
		}
	}
	for _, s := range sizes {
		fa, fb := get(s, a), get(s, b)
		var sa, sb, da, db Sample
		if fa.Rate != nil {
			sa.Add(fa.Rate.ClusterIP, false)
			da.Add(fa.Rate.Direct, false)
		}
		if fb.Rate != nil {
			sb.Add(fb.Rate.ClusterIP, false)
			db.Add(fb.Rate.Direct, false)
		}
		add(fmt.Sprintf("connection rate via ClusterIP (%d workers, %s)", r.Config.RateWorkers, r.Config.RateDuration), s, sa, sb, FmtRate)
		add("connection rate direct to pod (same run)", s, da, db, FmtRate)
		add("connection rate, ClusterIP ÷ direct (noise-robust)", s, quotient(sa, da), quotient(sb, db), FmtFactor)
	}

	return rows
}

// Errors lists the failed measurements.
func (r *Results) Errors() []string {
	var out []string
	for mode, bySize := range r.Figures {
		for size, m := range bySize {
			for name, f := range m {
				for _, e := range f.Errors {
					first, _, _ := strings.Cut(e, "\n")
					out = append(out, fmt.Sprintf("%s (%s mode) at %s Services: %s", name, mode, sizeName(size), first))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Markdown is the whole report: machine, method notes, table and failures.
func (r *Results) Markdown(machine, command string) string {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "### Benchmark run %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&buf, "Machine: %s.  \nCommand: `%s`; took %s.  \n", machine, command, r.Elapsed.Round(time.Second))
	for _, p := range r.Config.Proxies {
		fmt.Fprintf(&buf, "%s: %s.  \n", p.Name, BinaryIdentity(p.Bin))
	}
	loads := make([]string, 0, len(r.Load))
	keys := make([]int, 0, len(r.Load))
	for k := range r.Load {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		loads = append(loads, fmt.Sprintf("%s in %s", sizeName(k), r.Load[k].Round(time.Second)))
	}
	fmt.Fprintf(&buf, "Objects loaded once, incrementally, and shared by both proxies (not measured): %s.\n\n", strings.Join(loads, ", "))
	buf.WriteString(r.Table())
	buf.WriteString(`
Values are medians with [min–max] over the repetitions; "> x" means the proxy did not
finish within the cap; ratios compare medians within this run. In each mode both
proxies run in that mode, one after the other in the same node namespace; in between,
the nftables tables are deleted, the iptables tables restored empty and conntrack
flushed; repetitions alternate which proxy goes first. Initial sync: from process start
until every probed ClusterIP (an evenly spread sample) answered from a pod and the
kernel held every Service (nftables: the service-ips map; iptables: the "cluster IP"
rules of the nat KUBE-SERVICES chain). Change latency: from the EndpointSlice update
returning until the replaced single endpoint answered through the ClusterIP.
minSyncPeriod 0 is set with --iptables-min-sync-period=0 (flags only, no config file).
`)
	buf.WriteString(r.vmNote())
	buf.WriteString(r.changePhases())
	if errs := r.Errors(); len(errs) > 0 {
		buf.WriteString("\nFailed measurements:\n\n")
		for _, e := range errs {
			fmt.Fprintf(&buf, "- %s\n", e)
		}
	}
	return buf.String()
}

// inVM reports whether mode was measured in the test VM (Config.VM).
func (r *Results) inVM(mode string) bool {
	return r.Config.VM != nil && slices.Contains(r.Config.VM.Modes, mode)
}

// vmNote says where the VM's rows come from, when there are any.
func (r *Results) vmNote() string {
	var modes []string
	for _, m := range r.modes() {
		if r.inVM(m) {
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 {
		return ""
	}
	kernel := r.VMKernel
	if kernel == "" {
		kernel = "6.1"
	}
	return fmt.Sprintf(`
The %s rows come from the test VM (test/vm): Debian 12's kernel %s in qemu under TCG
emulation (no KVM on this machine), 2 emulated CPUs, against this machine's API server
and the same objects (loaded once, here). Both proxies run there, one after the other
in the VM lab's node1, %d initial syncs each (alternating which goes first), with the
ipvs objects (virtual servers, ipsets, kube-ipvs0), the iptables tables and conntrack
cleared in between, measured by the same code as the host's rows (the kernel's count
is that of IPv4 virtual servers). Emulation makes every absolute figure meaningless,
so only kproxy/upstream ratios are given (the raw figures are in the .json). ipvs
mode's minSyncPeriod defaults to 0 (upstream's default), so its change series, %d
changes at %s Services, each bounded by %s (upstream's ipvs syncs are all full ones,
25-40 s each under emulation, longer than the host's 30 s bound), is the
minSyncPeriod 0 row.
`, strings.Join(modes, ", "), kernel, r.Config.VM.Repeat, r.Config.VM.Changes, sizeName(r.Config.VM.changeSize()), r.Config.VM.changeBound())
}

// changePhases is the section splitting the median and the slowest changes of every
// series that the proxy's state API let the bench split (see ChangePhases).
func (r *Results) changePhases() string {
	var buf bytes.Buffer
	for _, mode := range r.modes() {
		if r.inVM(mode) {
			continue // absolute times under emulation: ratios only
		}
		for _, size := range slices.Sorted(maps.Keys(r.Figures[mode])) {
			for _, p := range r.Config.Proxies {
				f := r.Figures[mode][size][p.Name]
				if f == nil {
					continue
				}
				for _, c := range []struct {
					name string
					res  *ChangeResult
				}{{"minSyncPeriod 1s (default)", f.ChangeDefault}, {"minSyncPeriod 0", f.ChangeZero}} {
					lines := phaseLines(c.res)
					if lines == nil {
						continue
					}
					fmt.Fprintf(&buf, "- %s, %s, %s, %s: %s\n", p.Name, mode, sizeName(size), c.name, strings.Join(lines, "; "))
				}
			}
		}
	}
	if buf.Len() == 0 {
		return ""
	}
	return `
Where the change latency went (the median change and the slowest ones, in ms): the
update returned; "delivered" until the bench's own watch saw it; "queued in the proxy"
until the proxy's sync that wrote it started (from the proxy's state API); "sync" until
that sync ended; "answered" until the probe through the ClusterIP reached the new pod.

` + buf.String()
}

// ResultsStamp is the layout of the UTC timestamp naming a run's results.
const ResultsStamp = "20060102T150405Z"

// WriteResults writes report to dir/<UTC timestamp>.md and returns the path.
func WriteResults(dir string, started time.Time, report string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, started.UTC().Format(ResultsStamp)+".md")
	return path, os.WriteFile(path, []byte(report), 0o644)
}

// README markers delimiting the latest results in the Performance section.
const (
	ReadmeBegin = "<!-- bench:begin -->"
	ReadmeEnd   = "<!-- bench:end -->"
)

// UpdateReadme replaces the text between the markers in path with report; it reports
// false (and changes nothing) when the markers are absent.
func UpdateReadme(path, report string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	s := string(b)
	i, j := strings.Index(s, ReadmeBegin), strings.Index(s, ReadmeEnd)
	if i < 0 || j < i {
		return false, nil
	}
	s = s[:i+len(ReadmeBegin)] + "\n" + report + "\n" + s[j:]
	return true, os.WriteFile(path, []byte(s), 0o644)
}

// quotient is the ratio of the medians of a and b as a one-value sample.
func quotient(a, b Sample) Sample {
	var out Sample
	if len(a.Values) > 0 && len(b.Values) > 0 && Median(b.Values) != 0 {
		out.Add(Median(a.Values)/Median(b.Values), false)
	}
	return out
}

// FmtFactor formats a dimensionless ratio.
func FmtFactor(v float64) string { return fmt.Sprintf("%.2f", v) }

// WriteJSON writes the raw results beside the report (same name, .json).
func WriteJSON(mdPath string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(mdPath, ".md")+".json", b, 0o644)
}

// BinaryIdentity names a proxy binary: path, modification time and SHA-256 prefix, so
// that a result can be matched to the build it measured.
func BinaryIdentity(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("%s (%v)", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Sprintf("%s (%v)", path, err)
	}
	st, _ := f.Stat()
	return fmt.Sprintf("%s, built %s, sha256 %x", path, st.ModTime().UTC().Format("2006-01-02 15:04"), h.Sum(nil)[:6])
}
