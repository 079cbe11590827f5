package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/internal/testing/childproc"
)

// Process is a long-running program the lab started inside a namespace. The lab kills
// it at teardown; it also dies with the test process (parent-death signal).
type Process struct {
	Name    string
	NS      *NS
	LogPath string

	// KillOnStop skips the graceful SIGTERM (throw-away state such as the control plane).
	KillOnStop bool

	child *childproc.Child
	log   *os.File
	done  chan struct{} // closed once the child has exited and its log is closed
}

// startProcess runs bin with args inside ns, in its own process group, with stdout and
// stderr appended to logPath.
func startProcess(ns *NS, name, logPath, bin string, args ...string) (*Process, error) {
	return StartCommand(ns, name, logPath, append([]string{"ip", "netns", "exec", ns.Name, bin}, args...))
}

// StartCommand runs argv as given (the caller has wrapped it to enter ns, with
// `ip netns exec` or nsenter, and the program must exec in place so that Pid is the
// program's), in its own process group, with stdout and stderr appended to logPath. The
// process dies with its parent (parent-death signal); the caller stops it.
func StartCommand(ns *NS, name, logPath string, argv []string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	// Not CommandContext: the process outlives the start context; the lab stops it.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	child, err := childproc.Start(cmd) // with its parent-death signal
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, NS: ns, LogPath: logPath, child: child, log: logf, done: make(chan struct{})}
	go func() {
		<-child.Done()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID (`ip netns exec` execs the program in place).
func (p *Process) Pid() int { return p.child.Pid() }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its wait error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.child.Err()
	default:
		return false, nil
	}
}

// ExitReason is why the process stopped, for errors that wrap it: its wait error (an
// *exec.ExitError for a non-zero status or a signal), or errExitStatus0 when it exited
// with status 0. It is nil while the process runs.
func (p *Process) ExitReason() error {
	done, err := p.Exited()
	if done && err == nil {
		return errExitStatus0
	}
	return err
}

var errExitStatus0 = errors.New("exit status 0")

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Stop sends SIGTERM to the process group (unless KillOnStop), then SIGKILL after
// grace, and waits for the exit. A large process can take seconds to die on a loaded
// machine, hence the generous bound after SIGKILL.
func (p *Process) Stop(grace time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	if !p.KillOnStop {
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit within 60s of SIGKILL", p.Name, p.Pid())
	}
}

// Wait waits for the process to exit or ctx to end.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.child.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return tailFile(p.LogPath, n) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(string(bytes.Join(lines, []byte("\n"))))
}
