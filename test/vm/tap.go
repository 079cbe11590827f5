package vm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"time"
)

// tapName is a fresh name for the VM's tap device ("kpvm" and 8 hex digits: inside
// IFNAMSIZ, unique among VMs sharing a namespace).
func tapName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "kpvm" + hex.EncodeToString(b)
}

// tapWait bounds the wait for qemu to create the tap device (it does so while it
// starts, before the guest runs).
const tapWait = 20 * time.Second

// configureTap waits for qemu's tap device in the namespace, then gives it the host
// side's address and sets it up. qemu created it, so it goes away with qemu.
func configureTap(ctx context.Context, n *Network, tap string, exited <-chan struct{}) error {
	deadline := time.Now().Add(tapWait)
	for {
		if exec.CommandContext(ctx, "ip", "-n", n.Netns, "link", "show", "dev", tap).Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("qemu created no tap device %s in namespace %s within %v", tap, n.Netns, tapWait)
		}
		select {
		case <-exited:
			return fmt.Errorf("qemu stopped before creating the tap device %s in namespace %s", tap, n.Netns)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the tap device %s: %w", tap, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, args := range [][]string{
		{"addr", "add", n.Host.String(), "dev", tap},
		{"link", "set", "dev", tap, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", append([]string{"-n", n.Netns}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip -n %s %v: %w: %s", n.Netns, args, err, out)
		}
	}
	return nil
}
