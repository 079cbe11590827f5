package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// gtWorld is a Fake with vsTCP and vsUDP, each with rs1 and rs2.
func gtWorld(t *testing.T) (*Fake, *GracefulTermination, *clocktesting.FakeClock) {
	t.Helper()
	f := NewFake()
	for _, vs := range []VirtualServer{vsTCP, vsUDP} {
		mustDo(t, f.AddVirtualServer(vs), f.AddRealServer(vs.Key(), realServer(rs1, 1)), f.AddRealServer(vs.Key(), realServer(rs2, 1)))
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return f, NewGracefulTermination(f, clk, 0), clk
}

func realServersOf(t *testing.T, f *Fake, k Key) map[netip.AddrPort]int {
	t.Helper()
	rss, err := f.RealServers(k)
	mustDo(t, err)
	out := map[netip.AddrPort]int{}
	for _, rs := range rss {
		out[rs.AddrPort()] = rs.Weight
	}
	return out
}

func TestGracefulDeleteWithoutConnectionsIsImmediate(t *testing.T) {
	f, g, _ := gtWorld(t)
	mustDo(t, g.Delete(vsTCP.Key(), rs1))
	if diff := cmp.Diff(map[netip.AddrPort]int{rs2: 1}, realServersOf(t, f, vsTCP.Key()), addrOpt); diff != "" {
		t.Errorf("real servers (-want +got):\n%s", diff)
	}
	if g.InTerminationList(vsTCP.Key(), rs1) {
		t.Error("a deleted real server is in the termination list")
	}
}

func TestGracefulDeleteUDPIgnoresConnections(t *testing.T) {
	f, g, _ := gtWorld(t)
	mustDo(t, f.SetConnections(vsUDP.Key(), rs1, 4, 4))
	mustDo(t, g.Delete(vsUDP.Key(), rs1))
	if _, ok := realServersOf(t, f, vsUDP.Key())[rs1]; ok || g.InTerminationList(vsUDP.Key(), rs1) {
		t.Error("a UDP real server with connections was not deleted at once")
	}
}

func TestGracefulDeleteWaitsForConnections(t *testing.T) {
	f, g, _ := gtWorld(t)
	k := vsTCP.Key()
	mustDo(t, f.SetConnections(k, rs1, 1, 2))
	mustDo(t, g.Delete(k, rs1))
	if got := realServersOf(t, f, k); got[rs1] != 0 || len(got) != 2 {
		t.Errorf("real servers = %v, want rs1 kept with weight 0", got)
	}
	if !g.InTerminationList(k, rs1) || g.InTerminationList(k, rs2) || g.InTerminationList(vsUDP.Key(), rs1) {
		t.Error("termination list is wrong")
	}
	if got, want := g.Pending(), []Terminating{{k, rs1}}; !cmp.Equal(got, want, addrOpt) {
		t.Errorf("Pending = %v, want %v", got, want)
	}
	if got := g.Pending()[0].String(); got != "10.96.0.1:443/TCP/10.0.0.1:8443" {
		t.Errorf("String = %q, want upstream's unique name", got)
	}

	// A second Delete of a terminating real server changes nothing.
	calls := len(f.Calls())
	mustDo(t, g.Delete(k, rs1))
	if len(f.Calls()) != calls {
		t.Error("Delete of a terminating real server called the kernel")
	}

	// Connections left: a sweep keeps it.
	mustDo(t, f.SetConnections(k, rs1, 0, 1))
	mustDo(t, g.Sweep())
	if !g.InTerminationList(k, rs1) {
		t.Fatal("swept while an inactive connection was left")
	}
	// None left: the next sweep deletes it.
	mustDo(t, f.SetConnections(k, rs1, 0, 0))
	mustDo(t, g.Sweep())
	if _, ok := realServersOf(t, f, k)[rs1]; ok || g.InTerminationList(k, rs1) {
		t.Error("not deleted once its connections were gone")
	}
}

func TestGracefulSweepForgetsWhatIsGone(t *testing.T) {
	f, g, _ := gtWorld(t)
	k := vsTCP.Key()
	mustDo(t, f.SetConnections(k, rs1, 1, 0), f.SetConnections(k, rs2, 1, 0))
	mustDo(t, g.Delete(k, rs1), g.Delete(k, rs2))
	mustDo(t, f.DeleteRealServer(k, rs1))
	mustDo(t, g.Sweep())
	if g.InTerminationList(k, rs1) {
		t.Error("a real server deleted by someone else stays in the list")
	}
	mustDo(t, f.DeleteVirtualServer(k))
	mustDo(t, g.Sweep())
	if len(g.Pending()) != 0 {
		t.Errorf("real servers of a deleted virtual server stay in the list: %v", g.Pending())
	}
}

func TestGracefulSweepErrorsKeepThePending(t *testing.T) {
	f, g, _ := gtWorld(t)
	k := vsTCP.Key()
	mustDo(t, f.SetConnections(k, rs1, 1, 0))
	mustDo(t, g.Delete(k, rs1))
	mustDo(t, f.SetConnections(k, rs1, 0, 0))
	boom := errors.New("boom")
	f.SetError("DeleteRealServer", boom)
	if err := g.Sweep(); !errors.Is(err, boom) {
		t.Errorf("Sweep = %v, want the delete's error", err)
	}
	if !g.InTerminationList(k, rs1) {
		t.Error("a real server whose deletion failed was forgotten")
	}
}

func TestGracefulDeleteFailingWeightUpdate(t *testing.T) {
	f, g, _ := gtWorld(t)
	k := vsTCP.Key()
	mustDo(t, f.SetConnections(k, rs1, 1, 0))
	boom := errors.New("boom")
	f.SetError("UpdateRealServer", boom)
	if err := g.Delete(k, rs1); !errors.Is(err, boom) {
		t.Errorf("Delete = %v, want the update's error", err)
	}
	if g.InTerminationList(k, rs1) {
		t.Error("a real server that could not be quiesced is in the list")
	}
}

func TestGracefulCancel(t *testing.T) {
	f, g, _ := gtWorld(t)
	k := vsTCP.Key()
	if err := g.Cancel(k, rs1); err == nil {
		t.Error("Cancel of a real server that is not terminating succeeded")
	}
	mustDo(t, f.SetConnections(k, rs1, 1, 0))
	mustDo(t, g.Delete(k, rs1))
	mustDo(t, g.Cancel(k, rs1))
	if g.InTerminationList(k, rs1) {
		t.Error("still terminating after Cancel")
	}
	if _, ok := realServersOf(t, f, k)[rs1]; ok {
		t.Error("Cancel did not delete the real server (upstream's MoveRSOutofGracefulDeleteList)")
	}
	// The proxier adds it back.
	mustDo(t, f.AddRealServer(k, realServer(rs1, 1)))
}

func TestGracefulRunSweepsEveryInterval(t *testing.T) {
	f, g, clk := gtWorld(t)
	swept := make(chan struct{}, 1)
	g.afterSweep = func() { swept <- struct{}{} }
	k := vsTCP.Key()
	mustDo(t, f.SetConnections(k, rs1, 1, 0))
	mustDo(t, g.Delete(k, rs1))
	mustDo(t, f.SetConnections(k, rs1, 0, 0))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	for !clk.HasWaiters() { // Run has made its ticker
		runtime.Gosched()
	}
	clk.Step(DefaultSweepInterval - time.Second)
	if !g.InTerminationList(k, rs1) {
		t.Fatal("swept before the interval")
	}
	clk.Step(time.Second)
	<-swept
	if g.InTerminationList(k, rs1) {
		t.Error("not swept after the interval")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}
