// Package childproc starts the long-running child processes of tests (the lab's
// API server, etcd and proxies, the test VM's qemu) so that they die with the test
// process and only then.
//
// A parent-death signal (Pdeathsig) is the kernel's way to kill a child whose parent
// dies, but "parent" is the thread that forked it, not the process: Go starts a child
// from whatever OS thread the calling goroutine runs on, and when that thread later
// exits the child is killed although the test goes on. Threads do exit in tests: a
// goroutine that locks its thread to enter a network namespace and ends without
// unlocking it (the way to discard a thread left in the wrong namespace) takes the
// thread with it. That killed the test VM's qemu right after a test dialled into its
// namespace (CI, 2026-12-07: "the VM's frame stream ended before the payload's exit
// code (EOF)"). Start forks from a goroutine that keeps its thread locked until the
// child has been waited for, so the thread outlives the child.
package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Child is a started process.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's, valid once done is closed
}

// Start starts cmd with SIGKILL as its parent-death signal (keeping the rest of
// cmd.SysProcAttr) and waits for it in the background. The caller must not call
// cmd.Wait.
func Start(cmd *exec.Cmd) (*Child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	c := &Child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The thread that forks is the child's parent for Pdeathsig: it stays
		// locked to this goroutine, alive, until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err // exec's errors name the program
	}
	return c, nil
}

// Pid is the child's process ID.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed when the child has exited and been waited for.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is cmd.Wait's result once Done is closed (nil before).
func (c *Child) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}
