package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/internal/testing/childproc"
)

// Result is what one run of the VM gave.
type Result struct {
	// ExitCode is the payload's (128+N when signal N ended it; 125 when the agent
	// could not run it).
	ExitCode int
	// KernelRelease is the VM kernel's `uname -r`.
	KernelRelease string
	// Boot is the time from starting qemu to the agent's hello; Run from the hello to
	// the payload's exit.
	Boot, Run time.Duration
}

// stopWait bounds the wait for the VM to power off after the payload's exit code
// arrived; it is killed after that.
const stopWait = 30 * time.Second

// consoleLines is how much of the console an error shows.
const consoleLines = 40

// Run boots the VM with p, streams its output to cfg.Stdout and cfg.Stderr and
// returns its exit code. An error means there is no exit code: the VM did not come up
// within cfg.BootTimeout, the payload overran cfg.Timeout, the VM stopped without
// one, or ctx ended; the error holds the console's last lines. qemu is killed and the
// run's temporary directory removed before Run returns, whatever happened.
func (cfg Config) Run(ctx context.Context, p Payload) (Result, error) {
	cfg = cfg.withDefaults()
	var res Result
	if err := cfg.CheckAssets(); err != nil {
		return res, err
	}
	if cfg.Net != nil {
		if err := cfg.Net.validate(); err != nil {
			return res, err
		}
	}
	tmp, err := os.MkdirTemp("", "kproxy-vm-")
	if err != nil {
		return res, fmt.Errorf("a directory for the run: %w", err)
	}
	defer os.RemoveAll(tmp)
	initrd := filepath.Join(tmp, "initrd")
	if err := writeInitrd(initrd, cfg.Initramfs, cfg.Agent, p); err != nil {
		return res, err
	}
	sock := filepath.Join(tmp, "port.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return res, fmt.Errorf("the frame stream's socket: %w", err)
	}
	defer ln.Close()

	tap := tapName()
	console := &consoleTail{live: cfg.Console}
	cmd := qemuCommand(cfg, initrd, sock, tap)
	cmd.Stdout, cmd.Stderr = console, console
	start := time.Now()
	child, err := childproc.Start(cmd)
	if err != nil {
		return res, fmt.Errorf("starting %s: %w", cfg.QEMU, err)
	}
	exited := child.Done()
	stop := func() {
		select {
		case <-exited:
		default:
			killGroup(cmd)
			<-exited
		}
	}
	defer stop()
	fail := func(err error) (Result, error) {
		stop()
		return res, fmt.Errorf("%w\n--- the VM's console, last lines ---\n%s\n---", err, console.Tail(consoleLines))
	}

	if cfg.Net != nil {
		if err := configureTap(ctx, cfg.Net, tap, exited); err != nil {
			return fail(err)
		}
	}
	conn, err := accept(ctx, ln, start.Add(cfg.BootTimeout), exited)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	frames := make(chan frame)
	readErr := make(chan error, 1)
	go func() {
		for {
			f, err := readFrame(conn)
			if err != nil {
				readErr <- err
				return
			}
			frames <- f
		}
	}()
	host := &frameWriter{w: conn}

	var hello time.Time
	timer := time.NewTimer(cfg.BootTimeout - time.Since(start))
	defer timer.Stop()
	timeout := fmt.Errorf("the VM did not come up within %v (no hello from the agent)", cfg.BootTimeout)
	vmExited := exited
	for {
		select {
		case f := <-frames:
			switch f.kind {
			case frameHello:
				hello = time.Now()
				res.Boot, res.KernelRelease = hello.Sub(start), string(f.data)
				// qemu has loaded the initrd: nothing of the run needs the files any
				// more, and a wrapper killed from here on leaves none behind.
				_ = os.RemoveAll(tmp)
				timer.Stop()
				if cfg.Timeout > 0 {
					timer.Reset(cfg.Timeout)
					timeout = fmt.Errorf("the payload ran longer than %v in the VM", cfg.Timeout)
				}
			case frameStdout:
				_, _ = cfg.Stdout.Write(f.data)
			case frameStderr:
				_, _ = cfg.Stderr.Write(f.data)
			case frameExit:
				code, err := exitCode(f.data)
				if err != nil {
					return fail(err)
				}
				res.ExitCode, res.Run = code, time.Since(hello)
				_ = host.send(frameAck, nil)
				// /init powers off; a VM that does not is killed by the deferred stop.
				select {
				case <-exited:
				case <-time.After(stopWait):
				}
				return res, nil
			}
		case sig := <-cfg.Signals:
			if s, ok := sig.(syscall.Signal); ok && !hello.IsZero() {
				_ = host.send(frameSignal, []byte{byte(s)})
			}
		case err := <-readErr:
			return fail(fmt.Errorf("the VM's frame stream ended before the payload's exit code (%w)%s", err, exitNote(child)))
		case <-vmExited:
			// Frames still in the socket come first (the exit code may be among them),
			// then the end of the stream; the timer bounds the wait for both.
			vmExited = nil
			timer.Stop()
			timer.Reset(5 * time.Second)
			timeout = fmt.Errorf("the VM stopped before the payload's exit code%s", exitNote(child))
		case <-timer.C:
			return fail(timeout)
		case <-ctx.Done():
			return fail(fmt.Errorf("stopped: %w", ctx.Err()))
		}
	}
}

// exitNote describes qemu's exit for an error message, once it has exited.
func exitNote(qemu *childproc.Child) string {
	select {
	case <-qemu.Done():
		if err := qemu.Err(); err != nil {
			return fmt.Sprintf("; qemu: %v", err)
		}
		return "; qemu exited 0"
	default:
		return ""
	}
}

// accept waits for qemu to connect the virtio-serial port's socket (it does so as it
// starts), until deadline, qemu's exit or ctx's end.
func accept(ctx context.Context, ln *net.UnixListener, deadline time.Time, exited <-chan struct{}) (*net.UnixConn, error) {
	if err := ln.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("the socket's deadline: %w", err)
	}
	type result struct {
		c   *net.UnixConn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.AcceptUnix()
		got <- result{c, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			return nil, fmt.Errorf("qemu did not connect the frame stream: %w", r.err)
		}
		return r.c, nil
	case <-exited:
		_ = ln.Close()
		return nil, errors.New("qemu exited at start")
	case <-ctx.Done():
		_ = ln.Close()
		return nil, fmt.Errorf("stopped: %w", ctx.Err())
	}
}

// writeInitrd writes the base initramfs followed by the run's archive (the kernel
// unpacks concatenated archives in order; the base is padded to a 4-byte boundary).
func writeInitrd(name, base, agent string, p Payload) error {
	out, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("the run's initrd: %w", err)
	}
	defer out.Close()
	in, err := os.Open(base)
	if err != nil {
		return fmt.Errorf("the base initramfs: %w", err)
	}
	defer in.Close()
	n, err := io.Copy(out, in)
	if err != nil {
		return fmt.Errorf("copying the base initramfs: %w", err)
	}
	if r := n % 4; r != 0 {
		if _, err := out.Write(make([]byte, 4-r)); err != nil {
			return fmt.Errorf("padding the base initramfs: %w", err)
		}
	}
	if err := writeRunArchive(out, agent, p); err != nil {
		return fmt.Errorf("the run's archive: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("the run's initrd: %w", err)
	}
	return nil
}
