package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"
)

// VMPlan is the part of a run measured in the test VM (test/vm: Debian 12's 6.1
// kernel, which has IP_VS, under TCG emulation): both proxies run there in each of
// Modes, one after the other in the VM lab's node1, against the host lab's API server
// and the objects loaded into it, with the same measurement code as on the host.
// Emulation makes every absolute figure meaningless (several times slower than the
// host, and unevenly so), so the report gives only kproxy/upstream ratios for them.
type VMPlan struct {
	Modes []string // of VMModes
	Sizes []int    // Service counts whose initial sync is measured there (loaded on the host)
	// ChangeSize is the Service count of the change series there (0: the largest of
	// Sizes), and ChangeBound the bound of one change there (Config.ChangeBound).
	// Smaller than the host's size and longer than its bound: upstream's ipvs mode
	// makes every sync a full one, 25-40 s under TCG at 250 to 1,000 Services, so
	// its changes outlast the host's 30 s bound.
	ChangeSize  int
	ChangeBound time.Duration
	// Repeat is the initial-sync repetitions at every size, Changes the changes of the
	// change series, per proxy.
	Repeat, Changes int
	// Timeout bounds one VM run (one mode at one size: boot, lab, every measurement).
	Timeout time.Duration
}

// sizes are the VM's sizes, ChangeSize's among them; none without a plan.
func (p *VMPlan) sizes() []int {
	if p == nil || len(p.Modes) == 0 {
		return nil
	}
	out := slices.Clone(p.Sizes)
	if cs := p.changeSize(); cs > 0 && !slices.Contains(out, cs) {
		out = append(out, cs)
	}
	slices.Sort(out)
	return out
}

// changeBound is the bound of one change in the VM.
func (p *VMPlan) changeBound() time.Duration {
	return Config{ChangeBound: p.ChangeBound}.changeBound()
}

// changeSize is the Service count of the VM's change series.
func (p *VMPlan) changeSize() int {
	if p.ChangeSize > 0 || len(p.Sizes) == 0 {
		return p.ChangeSize
	}
	return slices.Max(p.Sizes)
}

// modesAt are the modes measured in the VM at size.
func (p *VMPlan) modesAt(size int) []string {
	if !slices.Contains(p.sizes(), size) {
		return nil
	}
	return p.Modes
}

// Config is the configuration of the run in the VM for mode at n Services: c's
// measurement settings, restricted to what the VM measures (initial sync with CPU and
// RSS, and change latency at ChangeSize; no dataplane, connection rate, state API or
// heap profiles, whose absolute figures emulation decides or which stay in the VM),
// with the VM's repetitions and changes.
func (p *VMPlan) Config(c Config, mode string, n int) Config {
	v := c
	v.Modes, v.ModeSizes, v.VM = []string{mode}, nil, nil
	v.Sizes, v.DataplaneSizes = []int{n}, nil
	v.Scenarios = []string{ScenarioSync}
	if n == p.changeSize() {
		v.Scenarios = append(v.Scenarios, ScenarioChange)
	}
	v.ChangeSize, v.Repeat, v.Changes, v.ChangeBound = n, p.Repeat, p.Changes, p.ChangeBound
	v.HeapProfileDir = ""
	return v
}

// VMMeasurer runs one mode at one size in the VM and returns each proxy's figures
// (by proxy name) and the VM's kernel release. VMHost is the implementation.
type VMMeasurer interface {
	Measure(ctx context.Context, c Config, mode string, n int) (figures map[string]*Figures, kernel string, err error)
}

// inVM measures mode at n Services in the VM into res. A failed VM run is recorded
// as every proxy's error and the run goes on. Afterwards the churn Services'
// EndpointSlices are read back from the API server: the VM's change series moved
// their endpoints, and the host's copies would be stale.
func (rn *Runner) inVM(ctx context.Context, res *Results, mode string, n int) error {
	logger := klog.FromContext(ctx)
	if rn.VM == nil {
		return fmt.Errorf("mode %s is measured in the VM, but the runner has none", mode)
	}
	start := time.Now()
	figs, kernel, err := rn.VM.Measure(ctx, rn.Config.VM.Config(rn.Config, mode, n), mode, n)
	logger.Info("VM run", "mode", mode, "services", n, "took", time.Since(start).Round(time.Second), "kernel", kernel, "err", err)
	if kernel != "" {
		res.VMKernel = kernel
	}
	for _, p := range rn.Config.Proxies {
		f := res.fig(mode, n, p.Name)
		if got := figs[p.Name]; got != nil {
			*f = *got
		}
		if err != nil {
			f.Errors = append(f.Errors, fmt.Sprintf("in the VM: %v", err))
		}
	}
	if _, aerr := rn.Loader.Adopt(ctx, n); aerr != nil {
		return fmt.Errorf("reading the Services back after the VM run: %w", aerr)
	}
	return nil
}
