package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// IsAgent reports whether this process is the agent in the VM: /init runs the
// per-run archive's AgentPath, and a binary that can be the agent (kproxy-vmexec, or
// a test binary that is its own agent, as test/vm's is) calls Agent when IsAgent.
func IsAgent() bool {
	return len(os.Args) > 0 && os.Args[0] == AgentPath && InVM()
}

// agentAckWait bounds the wait for the host's acknowledgement of the exit frame: after
// it the agent returns anyway and /init powers off.
const agentAckWait = 10 * time.Second

// RunAgentIfAgent runs Agent and exits with its code when this process is the
// agent (IsAgent); otherwise it returns. A binary that can be the agent calls it
// first thing in main or TestMain.
func RunAgentIfAgent() {
	if IsAgent() {
		os.Exit(Agent(context.Background()))
	}
}

// Agent runs the payload the spec names in the VM, streams its output to the host
// and returns its exit code (the code /init prints). It reports its own failures on
// stderr (the VM's console) and returns 125, as the payload did not run.
func Agent(ctx context.Context) int {
	if err := runAgent(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "kproxy-vm: agent: %v\n", err)
		var exit *agentExit
		if errors.As(err, &exit) {
			return exit.code
		}
		return 125
	}
	return 0
}

// agentExit carries the payload's non-zero exit code out of runAgent.
type agentExit struct{ code int }

func (e *agentExit) Error() string { return fmt.Sprintf("payload exited %d", e.code) }

func runAgent(ctx context.Context) error {
	js, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	var s spec
	if err := json.Unmarshal(js, &s); err != nil {
		return fmt.Errorf("decoding the spec: %w", err)
	}
	port, err := openPort(ctx, s.Port)
	if err != nil {
		return err
	}
	defer port.Close()
	out := &frameWriter{w: port}
	var uts syscall.Utsname
	_ = syscall.Uname(&uts)
	if err := out.send(frameHello, []byte(utsString(uts.Release[:]))); err != nil {
		return err
	}

	// One reader of the host's frames for the agent's life: signals for the payload,
	// then the acknowledgement of the exit frame.
	sigs := make(chan syscall.Signal, 4)
	acked := make(chan struct{})
	go readHost(port, sigs, acked)

	code, err := runPayload(ctx, s, out, sigs)
	if err != nil {
		// The host shows what went wrong with its own output, then the exit code.
		_ = out.send(frameStderr, []byte("kproxy-vm: "+err.Error()+"\n"))
		code = 125
	}
	if err := out.send(frameExit, exitPayload(code)); err != nil {
		return err
	}
	select {
	case <-acked:
	case <-time.After(agentAckWait):
		return fmt.Errorf("no acknowledgement of the exit frame from the host within %v", agentAckWait)
	}
	if code != 0 {
		return &agentExit{code: code}
	}
	return nil
}

// readHost reads the host's frames: signals go to sigs (dropped when four are
// pending), the acknowledgement closes acked, as does the end of the stream.
func readHost(port *os.File, sigs chan<- syscall.Signal, acked chan<- struct{}) {
	defer close(acked)
	for {
		f, err := readFrame(port)
		if err != nil || f.kind == frameAck {
			return
		}
		if f.kind == frameSignal && len(f.data) == 1 {
			select {
			case sigs <- syscall.Signal(f.data[0]):
			default:
			}
		}
	}
}

// runPayload runs the payload with its output framed to out, delivering the signals
// from sigs while it runs, and returns its exit code (128+signal when a signal ended
// it, as a shell reports it).
func runPayload(ctx context.Context, s spec, out *frameWriter, sigs <-chan syscall.Signal) (int, error) {
	if len(s.Args) == 0 {
		return 0, errors.New("the spec names no program")
	}
	if err := prepareOutputPaths(s.Args[1:]); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, s.Args[0], s.Args[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin", "HOME=/root", "TMPDIR=/tmp", "KPROXY_VM=1"}, s.Env...)
	cmd.Stdout = streamWriter{f: out, kind: frameStdout}
	cmd.Stderr = streamWriter{f: out, kind: frameStderr}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", s.Args[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	for running := true; running; {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err = <-waited:
			running = false
		}
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, fmt.Errorf("running %s: %w", s.Args[0], err)
}

// prepareOutputPaths creates the directories of the files the go command asks a
// test binary to write (its test log, profiles): they are host paths, absent in the
// VM. What is written there stays in the VM (the go command then does not cache the
// result, which `go test -count=1` does not anyway).
func prepareOutputPaths(args []string) error {
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok || !strings.HasPrefix(name, "test.") || !filepath.IsAbs(value) {
			continue
		}
		dir := filepath.Dir(value)
		if name == "test.outputdir" || name == "test.gocoverdir" {
			dir = value
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s for -%s: %w", dir, name, err)
		}
	}
	return nil
}

// openPort opens the virtio-serial port named name (its device node appears once
// virtio_console has bound it; /init loaded the module).
func openPort(ctx context.Context, name string) (*os.File, error) {
	const wait = 10 * time.Second
	deadline := time.Now().Add(wait)
	for {
		ports, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, p := range ports {
			b, err := os.ReadFile(p)
			if err == nil && strings.TrimSpace(string(b)) == name {
				dev := "/dev/" + filepath.Base(filepath.Dir(p))
				f, err := os.OpenFile(dev, os.O_RDWR, 0)
				if err == nil {
					return f, nil
				}
				if time.Now().After(deadline) {
					return nil, fmt.Errorf("opening the port %s: %w", dev, err)
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio-serial port named %s after %v (is virtio_console loaded?)", name, wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the port %s: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}
