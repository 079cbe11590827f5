// Command pause is the test cluster's pod sandbox image (registry.k8s.io/pause:3.10.2,
// built by hack/cluster-images.sh): the first process of every pod, which holds the
// pod's namespaces while its containers come and go.
//
// It exists because images cannot be pulled in the test cluster, and containerd's CRI
// plugin starts a sandbox image for each pod before anything else. It does what
// upstream's pause (build/pause/linux/pause.c) does, in Go so that it builds with the
// rest of the module: as PID 1 of the pod's PID namespace (shareProcessNamespace) it
// reaps the zombie children that are re-parented to it, and it exits 0 on SIGTERM or
// SIGINT, with which the kubelet and containerd stop a sandbox. Other signals are
// ignored, as the kernel does for a PID 1 without handlers. It is static
// (CGO_ENABLED=0), so its image holds nothing else. -v prints the version.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the image tag this program stands in for.
const version = "3.10.2"

func main() {
	for _, a := range os.Args[1:] {
		if a == "-v" {
			fmt.Printf("pause.go %s\n", version)
			return
		}
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// Children re-parented before the handler was installed.
	reap()
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
