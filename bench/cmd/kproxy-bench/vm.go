package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/bench"
	"github.com/kproxy/kproxy/test/vm"
)

// newVMHost is the host's half of the VM runs: the assets of make vm-assets, qemu, and
// this binary as the VM's agent and worker.
func newVMHost(root string, timeout time.Duration) (*bench.VMHost, error) {
	cfg, err := vm.ConfigFromEnv(root)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckAssets(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return nil, fmt.Errorf("no qemu-system-x86_64 (hack/setup.sh installs it): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("this binary's path (the VM's agent): %w", err)
	}
	return &bench.VMHost{VM: cfg, Self: self, Timeout: timeout, Log: os.Stderr}, nil
}

// runWorker is --vm-worker: the run in the VM (bench.RunInVM), its figures on
// standard output for the host, its log on standard error.
func runWorker(cfg bench.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return bench.RunInVM(klog.NewContext(ctx, klog.Background()), cfg, os.Stdout)
}
