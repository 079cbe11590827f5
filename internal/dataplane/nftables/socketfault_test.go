package nftables

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"iter"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	"github.com/kproxy/kproxy/internal/nftnetlink/nlfault"
	render "github.com/kproxy/kproxy/internal/render/nftables"
	"github.com/kproxy/kproxy/internal/testing/roottest"
)

// kernelNFT is the daemon's writer (nftnetlink.Executor) on a private network
// namespace, recording whether the last transaction was a full sync (which adds
// the table first; a partial sync never does).
type kernelNFT struct {
	*nftnetlink.Executor
	mu       sync.Mutex
	lastFull bool
	// replaces counts the transactions that deleted the table (a full sync
	// replacing it instead of refreshing it).
	replaces int
}

func (k *kernelNFT) RunOps(ctx context.Context, ops iter.Seq[nft.Op]) error {
	// Only the first iteration counts: the writer iterates again to quote a
	// failing operation.
	seen, full, replace, done := false, false, false, false
	err := k.Executor.RunOps(ctx, func(yield func(nft.Op) bool) {
		for op := range ops {
			if !done {
				if !seen {
					seen, full = true, op.Kind == nft.AddTable
				}
				replace = replace || op.Kind == nft.DeleteTable
			}
			if !yield(op) {
				done = true
				return
			}
		}
		done = true
	})
	k.mu.Lock()
	k.lastFull = full
	if replace {
		k.replaces++
	}
	k.mu.Unlock()
	return err
}

func (k *kernelNFT) replaced() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.replaces
}

func (k *kernelNFT) wasFull() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastFull
}

// kernelFixture is a Proxier writing a real table in a private network namespace
// (deleted with the test) through the netlink writer, whose sockets fail as in.
func kernelFixture(t *testing.T, in *nlfault.Injector) (*fixture, *kernelNFT) {
	t.Helper()
	roottest.Require(t, "programs nftables in a private network namespace", "ip")
	var r [4]byte
	_, _ = rand.Read(r[:])
	ns := "kpdp-" + hex.EncodeToString(r[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	ex, err := nftnetlink.New(knftables.IPv4Family, render.TableName, nftnetlink.Options{
		NetNSPath: "/run/netns/" + ns,
		WrapConn:  func(c nftnetlink.Conn) nftnetlink.Conn { return in.Wrap(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	k := &kernelNFT{Executor: ex}
	return newFixture(t, func(c *Config) { c.NFT = k }), k
}

// kernelDifferences lists how the kernel's table differs from want (nil: the
// full rendering of the model).
func (f *fixture) kernelDifferences(k *kernelNFT, want *nftnetlink.Inventory) []drift.Difference {
	f.t.Helper()
	ctx := context.Background()
	if want == nil {
		cfg := testRenderConfig()
		base := render.RenderBase(&cfg)
		st := render.NewState(&base, render.RenderServices(&cfg, slices.Collect(f.State.Views())))
		var err error
		if want, err = k.InventoryOf(render.FullOps(st)); err != nil {
			f.t.Fatal(err)
		}
	}
	got, err := k.ReadInventory(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var r drift.Report
	if err := nftnetlink.CompareInventories(ctx, want, got, &r); err != nil {
		f.t.Fatal(err)
	}
	return r.Differences
}

// TestKernelSocketFaults (issue 16, kernel faults: a netlink socket error): the
// proxier's syncs of a real table, whose netlink socket fails mid-sync with the
// kernel's errnos. A sync whose socket fails before the kernel took the batch
// fails, is counted in the failure metric, does not tell the health server it
// applied anything, and leaves the kernel's whole previous table; the next Sync,
// with no new event, is a full one (the proxier forgot what it had applied),
// succeeds, and the table is the model's full rendering. When the socket fails
// after the kernel took the batch, the outcome is unknown: the sync fails and is
// counted all the same, and the full retry gives the model's rendering. EINTR is
// no failure. After each recovery, syncs are partial again and stay correct.
func TestKernelSocketFaults(t *testing.T) {
	var in nlfault.Injector
	f, k := kernelFixture(t, &in)
	ctx := context.Background()
	f.AddStandardServices()
	f.sync()
	if d := f.kernelDifferences(k, nil); len(d) > 0 {
		t.Fatalf("after the first sync, the kernel differs from the model's rendering: %v", d)
	}
	const failures = "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"
	ip := 3
	changeEndpoint := func() {
		ip++
		f.State.UpdateEndpointSlice(nil, dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP,
			dptest.Ready("10.0.3."+strconv.Itoa(ip), "node-c")))
	}

	cases := []struct {
		name   string
		faults []nlfault.Fault
		// wantErr: the errno the sync fails with (nil: it succeeds).
		wantErr error
		// taken: the kernel took the batch before the socket failed.
		taken bool
		// retryFaults fail the first retry (a full sync) too; retryReplaces:
		// that retry replaces the table (its listing failed) rather than
		// refreshing it.
		retryFaults   []nlfault.Fault
		retryReplaces bool
	}{
		{name: "batch sendmsg interrupted (EINTR)",
			faults: []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.EINTR, Times: 2}}},
		{name: "batch sendmsg: ENOBUFS",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS},
		{name: "set type lookup: socket closed",
			faults:  []nlfault.Fault{{Call: nlfault.RequestSend, Close: true}},
			wantErr: syscall.EBADF},
		{name: "set type lookup: reply dropped (ENOBUFS)",
			faults:  []nlfault.Fault{{Call: nlfault.RequestRecv, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS},
		{name: "batch sendmsg: ENOBUFS, then the full retry's listing and batch too",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS,
			retryFaults: []nlfault.Fault{{Call: nlfault.RequestRecv, Errno: syscall.ENOBUFS},
				{Call: nlfault.BatchSend, Errno: syscall.ENOMEM}},
			retryReplaces: true},
		// A refresh that failed because the socket did is not the kernel's
		// refusal: the table is not replaced (which would reset session
		// affinity); the next retry refreshes it.
		{name: "batch sendmsg: ENOBUFS, then the full retry's refresh too",
			faults:      []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOBUFS}},
			wantErr:     syscall.ENOBUFS,
			retryFaults: []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOBUFS}}},
		{name: "socket closed after the batch was sent",
			faults:  []nlfault.Fault{{Call: nlfault.BatchRecv, Close: true}},
			wantErr: syscall.EBADF, taken: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			failed := f.metricValue(failures, dptest.IPv4Label)
			updates := f.Health.Count(v1.IPv4Protocol)
			before, err := k.ReadInventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			changeEndpoint()
			for _, fault := range c.faults {
				in.Arm(fault)
			}
			already := len(in.Injected())
			_, err = f.proxier.Sync(ctx)
			if n := in.Pending(); n > 0 {
				in.Disarm()
				t.Fatalf("%d armed faults were not injected (injected: %q)", n, in.Injected()[already:])
			}
			t.Logf("injected %q; Sync returned: %v", in.Injected()[already:], err)
			if k.wasFull() {
				t.Errorf("the sync with the fault was a full one, want a partial one")
			}
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("Sync: %v", err)
				}
				if got := f.metricValue(failures, dptest.IPv4Label); got != failed {
					t.Errorf("%s = %v, want %v: nothing failed", failures, got, failed)
				}
				if d := f.kernelDifferences(k, nil); len(d) > 0 {
					t.Errorf("the kernel differs from the model's rendering: %v", d)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Sync error = %v, want one wrapping %s", err, c.wantErr)
			}
			if got := f.metricValue(failures, dptest.IPv4Label); got != failed+1 {
				t.Errorf("%s = %v after the failed sync, want %v", failures, got, failed+1)
			}
			if got := f.Health.Count(v1.IPv4Protocol); got != updates {
				t.Errorf("the health server was told the failed sync applied")
			}
			if !c.taken {
				if d := f.kernelDifferences(k, before); len(d) > 0 {
					t.Errorf("the failed sync changed the kernel's table: %v", d)
				}
			}

			if c.retryFaults != nil {
				// The retry, a full sync, fails too (its listing of the table
				// and then the batch replacing it): counted, table kept.
				for _, fault := range c.retryFaults {
					in.Arm(fault)
				}
				already, replaces := len(in.Injected()), k.replaced()
				_, err := f.proxier.Sync(ctx)
				if got := k.replaced() - replaces; got != map[bool]int{true: 1}[c.retryReplaces] {
					t.Errorf("the failed retry replaced the table %d times, want %d (only a failed listing or the kernel's refusal of the refresh calls for it)", got, map[bool]int{true: 1}[c.retryReplaces])
				}
				if n := in.Pending(); n > 0 {
					in.Disarm()
					t.Fatalf("%d armed faults of the retry were not injected (injected: %q)", n, in.Injected()[already:])
				}
				t.Logf("retry: injected %q; Sync returned: %v", in.Injected()[already:], err)
				if !k.wasFull() || !errors.Is(err, c.retryFaults[len(c.retryFaults)-1].Errno) {
					t.Fatalf("the retry: full=%t, error %v; want a failed full sync", k.wasFull(), err)
				}
				failed++
				if got := f.metricValue(failures, dptest.IPv4Label); got != failed+1 {
					t.Errorf("%s = %v after the failed retry, want %v", failures, got, failed+1)
				}
				if d := f.kernelDifferences(k, before); len(d) > 0 {
					t.Errorf("the failed retry changed the kernel's table: %v", d)
				}
			}

			// The retry, with no new event, is a full sync and applies the model,
			// refreshing the table (a failed socket is no reason to replace it).
			replaces := k.replaced()
			f.sync()
			if !k.wasFull() {
				t.Errorf("the sync after the failure was not a full one")
			}
			if k.replaced() != replaces {
				t.Errorf("the retry replaced the table instead of refreshing it")
			}
			if d := f.kernelDifferences(k, nil); len(d) > 0 {
				t.Errorf("after the retry, the kernel differs from the model's rendering: %v", d)
			}
			if got := f.metricValue(failures, dptest.IPv4Label); got != failed+1 {
				t.Errorf("%s = %v after the retry, want %v", failures, got, failed+1)
			}
			if got := f.Health.Count(v1.IPv4Protocol); got != updates+1 {
				t.Errorf("health updated %d times after the retry, want %d", got-updates, 1)
			}

			// What the proxier thinks is applied is the kernel's table: the next
			// change is a partial sync again, and correct.
			changeEndpoint()
			f.sync()
			if k.wasFull() {
				t.Errorf("the sync after the recovery was a full one, want a partial one")
			}
			if d := f.kernelDifferences(k, nil); len(d) > 0 {
				t.Errorf("after a partial sync following the recovery, the kernel differs from the model's rendering: %v", d)
			}
		})
	}
}
