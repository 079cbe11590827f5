// Command kproxy-vmexec runs a program, typically a Go test binary, as root in a
// throw-away VM with Debian 12's kernel: `go test -exec kproxy-vmexec ./pkg/`. See the
// package test/vm for the contract and docs/vm.md for use.
//
// In the VM the same binary is the agent (/init runs it as /kproxy/agent).
//
// Environment: KPROXY_VM_FILES=host:guest,... (more files to pack), KPROXY_VM_ENV=NAME,...
// (variables passed to the payload, besides GOTRACEBACK, GODEBUG and GOMAXPROCS),
// KPROXY_VM_NETNS and KPROXY_VM_NET (a NIC on a tap in that namespace),
// KPROXY_VM_ASSETS, KPROXY_VM_BOOT_TIMEOUT, KPROXY_VM_CONSOLE=1 (the VM's console on
// stderr as it comes), KPROXY_VM_VERBOSE=1 (the boot and run times on stderr).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/test/vm"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	if vm.IsAgent() {
		return vm.Agent(ctx)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kproxy-vmexec PROGRAM [ARG...] (as go test -exec)")
		return 2
	}
	if err := execute(ctx, os.Args[1], os.Args[2:]); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			return int(code)
		}
		fmt.Fprintf(os.Stderr, "kproxy-vmexec: %v\n", err)
		return 1
	}
	return 0
}

// exitCode is the payload's non-zero exit code, passed on as ours.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

func execute(ctx context.Context, program string, args []string) error {
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("the working directory: %w", err)
	}
	cfg, err := vm.ConfigFromEnv(dir)
	if err != nil {
		return err
	}
	if cfg.Agent, err = os.Executable(); err != nil {
		return fmt.Errorf("finding this binary (the VM's agent): %w", err)
	}
	cfg.Stdout, cfg.Stderr = os.Stdout, os.Stderr
	if os.Getenv("KPROXY_VM_CONSOLE") == "1" {
		cfg.Console = os.Stderr
	}
	if d := testTimeout(args); d > 0 {
		// The test binary panics with its goroutines at its own -test.timeout (counted
		// from its start in the VM); go test kills this process a minute after it
		// (counted from our start). In between, the VM is stopped with its console.
		cfg.Timeout = d + 45*time.Second
	}
	// go test signals SIGQUIT on a timeout of its own: the test in the VM dumps its
	// goroutines as it would on the host.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGQUIT)
	cfg.Signals = sigs

	files, err := parseFiles(os.Getenv("KPROXY_VM_FILES"))
	if err != nil {
		return err
	}
	p := vm.Payload{Binary: program, Args: args, Dir: dir, Env: passEnv(os.Getenv("KPROXY_VM_ENV")), Files: files}
	res, err := cfg.Run(ctx, p)
	if err != nil {
		return err
	}
	if os.Getenv("KPROXY_VM_VERBOSE") == "1" {
		fmt.Fprintf(os.Stderr, "kproxy-vmexec: kernel %s, up in %.1fs, payload ran %.1fs, exit code %d\n",
			res.KernelRelease, res.Boot.Seconds(), res.Run.Seconds(), res.ExitCode)
	}
	if res.ExitCode != 0 {
		return exitCode(res.ExitCode)
	}
	return nil
}

// testTimeout is the -test.timeout go test passes, or 0.
func testTimeout(args []string) time.Duration {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			d, err := time.ParseDuration(v)
			if err == nil {
				return d
			}
		}
	}
	return 0
}

// passEnv is the payload's environment: GOTRACEBACK, GODEBUG and GOMAXPROCS when set,
// and the variables list names (commas or spaces between them).
func passEnv(list string) []string {
	names := append([]string{"GOTRACEBACK", "GODEBUG", "GOMAXPROCS"}, strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })...)
	var env []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// parseFiles parses KPROXY_VM_FILES: host:guest pairs separated by commas.
func parseFiles(s string) ([]vm.File, error) {
	var files []vm.File
	for _, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		host, guest, ok := strings.Cut(pair, ":")
		if !ok || host == "" || !strings.HasPrefix(guest, "/") {
			return nil, fmt.Errorf("KPROXY_VM_FILES: %q is not host:/guest/path", pair)
		}
		files = append(files, vm.File{Host: host, Guest: guest})
	}
	return files, nil
}
