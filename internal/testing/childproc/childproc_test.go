package childproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// onDyingThread runs fn on an OS thread that exits when fn returns (locked and
// never unlocked), and returns once the kernel has removed the thread: by then a
// child whose parent-death signal is tied to it has been sent that signal. The
// process's main thread never exits (the runtime parks a locked goroutine's thread
// there instead), so fn runs only on another one.
func onDyingThread(t *testing.T, fn func()) {
	t.Helper()
	// This goroutine keeps its own thread meanwhile, or the new goroutine would
	// run on it while it waits (often the main thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := 0
	for attempt := 0; tid == 0; attempt++ {
		if attempt == 100 {
			t.Fatal("100 goroutines in a row ran on the main thread")
		}
		tids := make(chan int, 1)
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == syscall.Getpid() {
				runtime.UnlockOSThread()
				tids <- 0
				return
			}
			fn()
			tids <- syscall.Gettid()
		}()
		tid = <-tids
	}
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s still there 10 s after its goroutine ended", task)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// catChild is a cat command (not started) and a function that reports whether the
// started cat still echoes a line (false once it is gone).
func catChild(t *testing.T) (*exec.Cmd, func() bool) {
	t.Helper()
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	})
	r := bufio.NewReader(out)
	alive := func() bool {
		if _, err := io.WriteString(in, "ping\n"); err != nil {
			return false
		}
		line, err := r.ReadString('\n')
		return err == nil && line == "ping\n"
	}
	return cmd, alive
}

// TestHazard shows what Start guards against: a child started with a parent-death
// signal from a thread that then exits is killed, though the process lives on.
func TestHazard(t *testing.T) {
	cmd, alive := catChild(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	onDyingThread(t, func() {
		if err := cmd.Start(); err != nil {
			t.Error(err)
		}
	})
	if alive() {
		t.Fatal("cat survived the exit of the thread that started it; the hazard this package guards against is not there")
	}
	_ = cmd.Wait()
}

// TestChildOutlivesStartingThread: started through Start from a thread that then
// exits, the child keeps running, and Done reports its exit.
func TestChildOutlivesStartingThread(t *testing.T) {
	cmd, alive := catChild(t)
	var c *Child
	onDyingThread(t, func() {
		var err error
		if c, err = Start(cmd); err != nil {
			t.Error(err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	if !alive() {
		t.Fatalf("cat (pid %d) died with the thread that called Start: %v", c.Pid(), c.Err())
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("Pdeathsig = %v, want SIGKILL", cmd.SysProcAttr.Pdeathsig)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10 s after killing the child")
	}
	if c.Err() == nil {
		t.Error("Err() = nil after SIGKILL, want the wait error")
	}
}

// TestStartError: a program that cannot start is an error, with no goroutine left
// waiting.
func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/kproxy-childproc")); err == nil {
		t.Fatal("Start of a missing program succeeded")
	}
}
