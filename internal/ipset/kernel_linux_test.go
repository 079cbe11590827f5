package ipset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/testing/netnsexec"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// kernelIPSet returns an Exec acting in a fresh network namespace, deleted
// when the test ends whatever the outcome.
func kernelIPSet(t *testing.T) *Exec {
	t.Helper()
	roottest.Require(t, "creates a network namespace and ipsets in it", "ip", "ipset")
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kpl-%d-ipset-%s", os.Getpid(), hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v: %s", name, err, out)
		}
	})
	s := New(netnsexec.Exec{NS: name})
	if _, err := s.ListSets(context.Background()); err != nil {
		t.Skipf("ipset unusable in a network namespace on this kernel: %v", err)
	}
	return s
}

func TestKernelVersion(t *testing.T) {
	s := kernelIPSet(t)
	v, err := s.Version(context.Background())
	mustDo(t, err)
	t.Logf("ipset %s", v)
}

// TestKernelPlanRoundTrip creates every set type of both families through
// Plan and Restore, and reads the entries back exactly as written: the
// notation kproxy writes is the one the kernel prints.
func TestKernelPlanRoundTrip(t *testing.T) {
	s := kernelIPSet(t)
	ctx := context.Background()
	desired := append(upstreamSets(v1.IPv4Protocol), upstreamSets(v1.IPv6Protocol)...)
	// A host network in hash:ip,port,net, which the kernel prints without
	// its prefix length.
	desired[2].Entries = append(desired[2].Entries, "10.96.0.10,tcp:80,198.51.100.7")
	desired[2+5].Entries = append(desired[2+5].Entries, "fd00:10:96::a,sctp:80,2001:db8::7")
	mustDo(t, s.Restore(ctx, Plan(desired, nil)))
	checkKernel(t, s, desired)

	// Converge: remove some entries, add others, empty one set.
	desired[0].Entries = []string{"10.96.0.10,udp:53", "10.96.0.11,tcp:443"}
	desired[3].Entries = []string{"30443", "32000"}
	desired[5+1].Entries = nil
	current, err := s.Save(ctx)
	mustDo(t, err)
	script := Plan(desired, current)
	mustDo(t, s.Restore(ctx, script))
	checkKernel(t, s, desired)
	current, err = s.Save(ctx)
	mustDo(t, err)
	if again := Plan(desired, current); len(again) != 0 {
		t.Errorf("after converging, Plan = %q, want nothing", again)
	}

	// A fresh restore of the whole script again is a no-op (-exist).
	mustDo(t, s.Restore(ctx, Plan(desired, nil)))
	checkKernel(t, s, desired)

	names, err := s.ListSets(ctx)
	mustDo(t, err)
	if len(names) != len(desired) {
		t.Errorf("ListSets = %v", names)
	}
	for _, name := range names {
		mustDo(t, s.Destroy(ctx, name))
	}
	mustDo(t, s.Destroy(ctx, names[0])) // gone: not an error
	if names, _ := s.ListSets(ctx); len(names) != 0 {
		t.Errorf("sets left: %v", names)
	}
	if _, err := s.Entries(ctx, "KUBE-CLUSTER-IP"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Entries of a destroyed set = %v, want ErrNotFound", err)
	}
}

func checkKernel(t *testing.T, s *Exec, desired []Contents) {
	t.Helper()
	ctx := context.Background()
	for _, c := range desired {
		got, err := s.Entries(ctx, c.Set.Name)
		mustDo(t, err)
		want := slices.Sorted(slices.Values(c.Entries))
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("set %s as the kernel prints it (-want +got):\n%s", c.Set.Name, diff)
		}
	}
}
