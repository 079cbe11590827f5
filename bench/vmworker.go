package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/test/lab"
)

// LabOptions is the lab the bench runs in, on the host and in the VM alike: the VM's
// lab must have the host's pod layout, since the objects loaded on the host name the
// pods' addresses as endpoints.
func LabOptions(keepWorkDir bool) lab.Options {
	return lab.Options{
		Node1Pods:    6, // pod 1 is the client; the other ten pods are the real backends
		Node2Pods:    5,
		BackendPorts: []lab.BackendPort{{Protocol: "TCP", Port: ServicePort}},
		KeepWorkDir:  keepWorkDir,
		// More concurrent writes while loading (lab-facts.md).
		ExtraAPIServerArgs: []string{"--max-requests-inflight=4000", "--max-mutating-requests-inflight=2000"},
	}
}

// RunInVM is the VM's half of a VM run (VMHost starts it): it builds the lab in the
// VM on the host's API server (lab.ExternalFromEnv), takes the first n Services the
// host loaded (Loader.Adopt), runs c (one mode, one size: VMPlan.Config) and prints
// the figures to out on one VMFiguresPrefix line. The lab is torn down on return.
func RunInVM(ctx context.Context, c Config, out io.Writer) (err error) {
	if len(c.Modes) != 1 || len(c.Sizes) != 1 {
		return fmt.Errorf("a VM run measures one mode at one size, got modes %v and sizes %v", c.Modes, c.Sizes)
	}
	mode, n := c.Modes[0], c.Sizes[0]
	ext, err := lab.ExternalFromEnv()
	if err != nil {
		return err
	}
	if ext == nil {
		return fmt.Errorf("no API server to use: %s is unset (VMHost sets it)", lab.ExternalAPIServerEnv)
	}
	opts := LabOptions(false)
	opts.External, opts.ExtraAPIServerArgs = ext, nil
	l := lab.New(opts)
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown of the VM's lab: %w", cerr))
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.Start(startCtx); err != nil {
		return fmt.Errorf("the VM's lab: %w", err)
	}
	if mode == ModeIPVS {
		// Its rules around the virtual servers are iptables rules: both proxies must
		// write them through the same backend.
		if err := CheckIPTablesBackend(ctx, l); err != nil {
			return err
		}
	}
	rn := NewRunner(l, c)
	took, err := rn.Loader.Adopt(ctx, n)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Adopted the host's Services", "services", n, "took", took.Round(time.Millisecond))
	res, runErr := rn.Run(ctx)
	if res == nil {
		return runErr
	}
	b, err := json.Marshal(res.Figures[mode][n])
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("encoding the figures: %w", err))
	}
	if _, err := fmt.Fprintf(out, "%s%s\n", VMFiguresPrefix, b); err != nil {
		return errors.Join(runErr, fmt.Errorf("printing the figures: %w", err))
	}
	return runErr
}
