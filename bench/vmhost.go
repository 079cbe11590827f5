package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/vm"
)

// VMFiguresPrefix starts the line on which the run in the VM prints its figures
// (JSON, by proxy name) to its standard output, for VMHost.
const VMFiguresPrefix = "kproxy-bench-vm-figures: "

// Where the VM run finds the two proxies (packed by VMHost).
const (
	vmKproxyPath   = "/kproxy/kube-proxy"
	vmUpstreamPath = "/kproxy/kube-proxy-upstream"
)

// VMHost is the host's half of the VM runs: it boots the test VM with a NIC on a tap
// in the host lab's node1 (lab.VMUplinkHost), packs both proxies, and runs Self (the
// kproxy-bench binary, also the VM's agent: vm.IsAgent) there with WorkerArgs, which
// builds a lab in the VM on the host's API server (RunInVM) and prints its figures.
type VMHost struct {
	Lab  *lab.Lab  // the host's lab: its API server, its node1 for the tap
	VM   vm.Config // assets (vm.ConfigFromEnv); Agent, Net, Timeout, output set here
	Self string    // the kproxy-bench binary (os.Executable)
	// Timeout bounds one VM run (VMPlan.Timeout).
	Timeout time.Duration
	// Log receives the VM run's standard error (its progress); nil discards it.
	Log io.Writer
}

// Measure implements VMMeasurer.
func (h *VMHost) Measure(ctx context.Context, c Config, mode string, n int) (map[string]*Figures, string, error) {
	cfg := h.VM
	cfg.Agent = h.Self
	cfg.Net = &vm.Network{Netns: h.Lab.Node1.NS.Name, Guest: lab.VMUplinkGuest, Host: lab.VMUplinkHost}
	cfg.Timeout = h.Timeout
	var out bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, h.Log
	if len(c.Proxies) != 2 {
		return nil, "", fmt.Errorf("the VM run compares two proxies, got %d", len(c.Proxies))
	}
	res, err := cfg.Run(ctx, vm.Payload{
		Binary: h.Self,
		Args:   WorkerArgs(c, mode, n),
		Dir:    "/tmp",
		Env:    h.Lab.ExternalForVM().Env(),
		Files: []vm.File{
			{Host: c.Proxies[0].Bin, Guest: vmKproxyPath},
			{Host: c.Proxies[1].Bin, Guest: vmUpstreamPath},
		},
	})
	if err != nil {
		return nil, "", fmt.Errorf("VM run of %s at %d Services: %w", mode, n, err)
	}
	figs, perr := parseVMFigures(&out)
	if res.ExitCode != 0 {
		return figs, res.KernelRelease, fmt.Errorf("the run in the VM exited %d (its log is above)", res.ExitCode)
	}
	return figs, res.KernelRelease, perr
}

// WorkerArgs is the command line of the run in the VM for mode at n Services (c from
// VMPlan.Config): kproxy-bench's own flags, read back by its --vm-worker mode.
func WorkerArgs(c Config, mode string, n int) []string {
	return []string{
		"--vm-worker",
		"--modes=" + mode,
		"--services=" + strconv.Itoa(n),
		"--dataplane-services=",
		"--scenarios=" + strings.Join(c.Scenarios, ","),
		"--repeat=" + strconv.Itoa(c.Repeat),
		"--changes=" + strconv.Itoa(c.Changes),
		"--change-services=" + strconv.Itoa(c.ChangeSize),
		"--change-gap=" + c.GapDefault.String(),
		"--change-gap-zero=" + c.GapZero.String(),
		"--change-bound=" + c.changeBound().String(),
		"--cap=" + c.Cap.String(),
		"--sample=" + strconv.Itoa(c.SampleSize),
		"--heap-profiles=false",
		"--update-readme=false",
		"--kproxy=" + vmKproxyPath,
		"--upstream=" + vmUpstreamPath,
	}
}

// parseVMFigures finds the figures line in the VM run's standard output.
func parseVMFigures(r io.Reader) (map[string]*Figures, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), VMFiguresPrefix); ok {
			var figs map[string]*Figures
			if err := json.Unmarshal([]byte(rest), &figs); err != nil {
				return nil, fmt.Errorf("the VM run's figures: %w", err)
			}
			return figs, nil
		}
	}
	return nil, fmt.Errorf("the VM run printed no figures (no %q line)", strings.TrimSpace(VMFiguresPrefix))
}
