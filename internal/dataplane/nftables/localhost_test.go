package nftables

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/localnodeports"
	"github.com/kproxy/kproxy/internal/model"
)

// localhostFixture is a proxier with the localhost NodePort listeners wired as
// internal/app wires them: the table rejects localhost UDP/SCTP NodePorts, and a
// Tracker hands the TCP ones to a manager (here a Fake) after every good sync.
func localhostFixture(t *testing.T) (*fixture, *localnodeports.Fake) {
	fake := &localnodeports.Fake{}
	var tracker *localnodeports.Tracker
	f := newFixture(t, func(c *Config) {
		c.Render.LocalhostNodePorts.Enabled = true
		c.Render.LocalhostNodePorts.Proxied = true
		c.AfterSync = func(_ context.Context, full bool, changed, deleted []model.ServicePortName) {
			tracker.Synced(full, changed, deleted)
		}
	})
	tracker = localnodeports.NewTracker(v1.IPv4Protocol, f.State, fake)
	return f, fake
}

func listenerPorts(t *testing.T, fake *localnodeports.Fake) []uint16 {
	t.Helper()
	specs, ok := fake.Last()
	if !ok {
		t.Fatal("no Sync reached the listener manager")
	}
	var out []uint16
	for _, s := range specs {
		out = append(out, s.NodePort)
	}
	return out
}

// TestLocalhostNodePortListenersFollowSyncs: the listeners follow the applied model
// (TCP NodePorts with endpoints for external traffic), are handed over after every
// successful sync, including one with nothing to write, and not after a failed one.
func TestLocalhostNodePortListenersFollowSyncs(t *testing.T) {
	f, fake := localhostFixture(t)
	f.AddStandardServices() // ns2/lb: eTP Local without a local endpoint: no listener
	web := dptest.Service("ns3", "np", "172.30.0.30", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080),
		dptest.WithPort("dns", v1.ProtocolUDP, 53, 5353), dptest.AsLoadBalancer("1.2.3.5", 30053, false, 0))
	web.Spec.Ports[0].NodePort = 30081
	f.State.OnServiceAdd(web)
	f.State.AddEndpointSlice(dptest.Slice("ns3", "np", "np-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.2.9", "node-b")))
	f.sync()
	if got := listenerPorts(t, fake); !slices.Equal(got, []uint16{30081}) {
		t.Fatalf("listeners %v, want [30081]", got)
	}
	f.checkTableIsFullRender(f.proxier.renderCfg)

	// Nothing changed: handed again (a listener that failed to bind is retried).
	n := len(fake.Syncs())
	f.sync()
	if len(fake.Syncs()) != n+1 {
		t.Errorf("an idle sync did not reach the manager")
	}

	// The endpoints go away: no listener.
	f.State.DeleteEndpointSlice(dptest.Slice("ns3", "np", "np-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.2.9", "node-b")))
	f.sync()
	if got := listenerPorts(t, fake); len(got) != 0 {
		t.Errorf("listeners %v after the endpoints went away", got)
	}

	// A failed transaction hands nothing; the next (full) sync does.
	f.State.AddEndpointSlice(dptest.Slice("ns3", "np", "np-2", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.2.10", "node-b")))
	f.nft.failNext = 1
	n = len(fake.Syncs())
	if _, err := f.proxier.Sync(context.Background()); err == nil {
		t.Fatal("the injected failure did not fail the sync")
	}
	if len(fake.Syncs()) != n {
		t.Error("a failed sync reached the manager")
	}
	f.sync()
	if got := listenerPorts(t, fake); !slices.Equal(got, []uint16{30081}) {
		t.Errorf("listeners %v after the retry, want [30081]", got)
	}
	specs, _ := fake.Last()
	if got := specs[0].Endpoints; len(got) != 1 || got[0].String() != "10.0.2.10:8080" {
		t.Errorf("endpoints %v, want the new one", got)
	}
}
