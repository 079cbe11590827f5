package nftnetlink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/drift"
	"github.com/kproxy/kproxy/internal/model"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink/nlfault"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// TestSocketFaults (issue 16, kernel faults: a netlink socket error): partial
// syncs of a real table whose socket fails mid-sync with the errnos the kernel
// returns. Each sync adds a Service and deletes another, so that its batch adds
// and deletes chains, rules and elements of maps it does not define (whose type
// the writer first asks the kernel for, on the same socket).
//
//   - A failure before the kernel took the batch (sendmsg failed, or the set type
//     lookup before it) is an error carrying the errno; the kernel holds the
//     previous whole table (its inventory and ruleset generation unchanged), and
//     the retry of the same operations, on a new socket, applies them.
//   - EINTR is retried: the sync succeeds.
//   - ENOBUFS reading the replies of a batch the kernel refused (its error replies
//     overflowed) is still a failure, with the previous table kept, and the
//     kernel's refusal (not IsSocketError, which every other failure here is).
//   - When the socket fails after the kernel took the batch, the error says the
//     outcome is unknown: the kernel may hold the new table (here it does), and
//     the caller's retry, a full rewrite as the dataplane's, gives the table
//     it renders.
func TestSocketFaults(t *testing.T) {
	needRoot(t)
	ns := testNetns(t)
	ctx := context.Background()
	var in nlfault.Injector
	cfg := testConfig(knftables.IPv4Family)
	ex, err := New(cfg.Family, render.TableName, Options{NetNSPath: netnsPath(ns), WrapConn: func(c Conn) Conn { return in.Wrap(c) }})
	if err != nil {
		t.Fatal(err)
	}
	live := scaleViews(20, 3)
	st := renderState(cfg, live)
	if err := ex.RunOps(ctx, render.FullOps(st)); err != nil {
		t.Fatalf("first full sync: %v", err)
	}
	checkTable(t, ex, st, "after the first full sync")
	next := len(live) + 1

	cases := []struct {
		name   string
		faults []nlfault.Fault
		// wantErr is the errno the sync fails with; nil: it succeeds.
		wantErr error
		// refused places a rule of another program jumping to a chain the
		// sync deletes: the kernel refuses the batch (EBUSY).
		refused bool
		// taken: the kernel took the batch before the socket failed.
		taken bool
	}{
		{name: "batch sendmsg interrupted 3 times (EINTR), retried",
			faults: []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.EINTR, Times: 3}}},
		{name: "batch sendmsg: no buffer space (ENOBUFS)",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS},
		{name: "batch sendmsg: out of memory (ENOMEM)",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.ENOMEM}},
			wantErr: syscall.ENOMEM},
		{name: "batch sendmsg: would block (EAGAIN)",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Errno: syscall.EAGAIN}},
			wantErr: syscall.EAGAIN},
		{name: "socket closed before the batch",
			faults:  []nlfault.Fault{{Call: nlfault.BatchSend, Close: true}},
			wantErr: syscall.EBADF},
		{name: "set type lookup: reply dropped (ENOBUFS)",
			faults:  []nlfault.Fault{{Call: nlfault.RequestRecv, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS},
		{name: "set type lookup: socket closed",
			faults:  []nlfault.Fault{{Call: nlfault.RequestSend, Close: true}},
			wantErr: syscall.EBADF},
		{name: "set type lookup and batch replies interrupted (EINTR), retried",
			faults: []nlfault.Fault{{Call: nlfault.RequestRecv, Errno: syscall.EINTR}, {Call: nlfault.BatchRecv, Errno: syscall.EINTR}}},
		{name: "refused batch, its error replies dropped (ENOBUFS)",
			faults:  []nlfault.Fault{{Call: nlfault.BatchRecv, Errno: syscall.ENOBUFS}},
			wantErr: syscall.ENOBUFS, refused: true},
		{name: "socket closed after the batch was sent",
			faults:  []nlfault.Fault{{Call: nlfault.BatchRecv, Close: true}},
			wantErr: syscall.EBADF, taken: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			added, gone := scaleView(next, 3), live[0]
			next++
			plan := st.Plan(nil, map[model.ServicePortName]*render.Fragment{added.Name: fragment(cfg, added), gone.Name: nil}, render.PlanOptions{})
			ops := slices.Values(plan.Ops)
			if c.refused {
				placeObstacle(t, ns, plan.Ops)
			}
			before, err := ex.ReadInventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gen, err := ex.Generation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			already := len(in.Injected())
			for _, f := range c.faults {
				in.Arm(f)
			}
			err = ex.RunOps(ctx, ops)
			if n := in.Pending(); n > 0 {
				in.Disarm()
				t.Fatalf("%d armed faults were not injected (injected: %q): the sync made fewer calls than the test expects", n, in.Injected())
			}
			t.Logf("injected %q; the sync returned: %v", in.Injected()[already:], err)
			commit := func() { st.Commit(plan); live = append(live[1:], added) }
			switch {
			case c.wantErr == nil:
				if err != nil {
					t.Fatalf("sync failed: %v", err)
				}
				commit()
				checkTable(t, ex, st, "after the sync")
				return
			case !errors.Is(err, c.wantErr):
				t.Fatalf("sync error = %v, want one wrapping %s", err, c.wantErr)
			case IsSocketError(err) == c.refused:
				t.Errorf("IsSocketError(%v) = %t, want %t: only a batch the kernel refused is not a socket's failure", err, c.refused, !c.refused)
			}
			if c.taken {
				if !strings.Contains(err.Error(), "outcome unknown") {
					t.Errorf("sync error = %v, want it to say the batch's outcome is unknown", err)
				}
				// The kernel committed the batch before the socket closed.
				commit()
				checkTable(t, ex, st, "after the batch taken before the socket closed")
				if err := ex.RunOps(ctx, render.FullOps(st)); err != nil {
					t.Fatalf("the full rewrite after the failure: %v", err)
				}
				checkTable(t, ex, st, "after the full rewrite")
				return
			}
			after, err := ex.ReadInventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var r drift.Report
			if err := CompareInventories(ctx, before, after, &r); err != nil {
				t.Fatal(err)
			}
			for _, d := range r.Differences {
				t.Errorf("the failed sync changed the kernel's table: %s", d)
			}
			if g, err := ex.Generation(ctx); err != nil || g != gen {
				t.Errorf("ruleset generation = %d (%v) after the failed sync, want %d: nothing committed", g, err, gen)
			}
			if c.refused {
				removeObstacle(t, ns)
			}
			// The retry, on a new socket, applies the same operations.
			if err := ex.RunOps(ctx, ops); err != nil {
				t.Fatalf("retry: %v", err)
			}
			commit()
			checkTable(t, ex, st, "after the retry")
		})
	}
}

// checkTable fails t unless the kernel's table is the full rendering of st.
func checkTable(t *testing.T, ex *Executor, st *render.State, when string) {
	t.Helper()
	if diffs := compare(t, ex, st); len(diffs) > 0 {
		t.Fatalf("%s, the kernel's table differs from the rendering:\n%s", when, strings.Join(diffs, "\n"))
	}
}

const obstacleChain = "obstacle"

// placeObstacle adds a chain of kproxy's table that is not in its rendering,
// with a rule jumping to the first chain ops delete: the kernel refuses to delete
// a chain still jumped to (EBUSY).
func placeObstacle(t *testing.T, ns string, ops []nft.Op) {
	t.Helper()
	i := slices.IndexFunc(ops, func(op nft.Op) bool { return op.Kind == nft.DeleteChain })
	if i < 0 {
		t.Fatal("the sync deletes no chain")
	}
	if out, err := nftIn(ns, "", "add chain ip kube-proxy "+obstacleChain+"; add rule ip kube-proxy "+obstacleChain+" jump "+ops[i].Name); err != nil {
		t.Fatalf("placing the obstacle: %v\n%s", err, out)
	}
}

func removeObstacle(t *testing.T, ns string) {
	t.Helper()
	if out, err := nftIn(ns, "", "delete chain ip kube-proxy "+obstacleChain); err != nil {
		t.Fatalf("removing the obstacle: %v\n%s", err, out)
	}
}
