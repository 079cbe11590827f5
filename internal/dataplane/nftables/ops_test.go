package nftables

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/nft"
	"github.com/kproxy/kproxy/internal/nftnetlink"
	render "github.com/kproxy/kproxy/internal/render/nftables"
)

// opsNFT is a writer that applies a stream of typed operations in one
// transaction, as nftnetlink.Executor.RunOps does in one batch, here on the Fake
// (render.AddOps); asked to fail, it fails the whole call without applying
// anything.
type opsNFT struct {
	*recordingNFT
	calls int
	ops   int // operations of the last call
	// failures is the number of next calls to fail.
	failures int
}

func (s *opsNFT) RunOps(ctx context.Context, ops iter.Seq[nft.Op]) error {
	s.calls++
	s.ops = 0
	tx := s.recordingNFT.Fake.NewTransaction()
	for op := range ops {
		s.ops++
		render.AddOps(tx, slices.Values([]nft.Op{op}))
	}
	if s.failures > 0 {
		s.failures--
		return errInjected
	}
	s.recordingNFT.mu.Lock()
	defer s.recordingNFT.mu.Unlock()
	return s.recordingNFT.Fake.Run(ctx, tx)
}

// TestFullSyncAsOps: with a writer that takes typed operations, a full sync is
// written as one stream of them that programs the full render; a failed one is
// retried in full; a partial sync is written as operations too, never as a
// knftables transaction.
func TestFullSyncAsOps(t *testing.T) {
	var writer *opsNFT
	f := newFixture(t, func(c *Config) {
		writer = &opsNFT{recordingNFT: c.NFT.(*recordingNFT)}
		c.NFT = writer
	})
	const services = 800
	for i := range services {
		name := fmt.Sprintf("svc-%d", i)
		f.State.OnServiceAdd(dptest.Service("ns", name, fmt.Sprintf("172.30.%d.%d", i/250, i%250+1), dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
		f.State.AddEndpointSlice(dptest.Slice("ns", name, name+"-1", 8080, "http", v1.ProtocolTCP,
			dptest.Ready(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), testNodeName), dptest.Ready(fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), "node-b")))
	}

	// The refresh, then the replacement of the table, fail.
	writer.failures = 2
	if _, err := f.proxier.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded although the writer failed")
	}
	if writer.calls != 2 || writer.runs() != 0 {
		t.Fatalf("failed full sync: %d RunOps calls, %d transactions; want 2 and 0", writer.calls, writer.runs())
	}

	f.sync()
	if writer.calls != 3 || writer.runs() != 0 {
		t.Fatalf("the retry after a failure made %d RunOps calls and %d transactions in all, want 3 and 0 (a full sync again)", writer.calls, writer.runs())
	}
	if writer.ops < services {
		t.Fatalf("full sync of %d Services written in %d operations", services, writer.ops)
	}
	f.checkTableIsFullRender(testRenderConfig())

	// A partial sync is one RunOps call.
	f.State.OnServiceDelete(dptest.Service("ns", "svc-7", "172.30.0.8", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.sync()
	if writer.calls != 4 || writer.runs() != 0 {
		t.Fatalf("partial sync: %d RunOps calls and %d transactions in all, want 4 and 0", writer.calls, writer.runs())
	}
	if writer.ops == 0 || writer.ops >= services {
		t.Fatalf("partial sync of one deleted Service written in %d operations", writer.ops)
	}
	f.checkTableIsFullRender(testRenderConfig())
}

// TestPrecommit: changes committed ahead of the first sync are applied by it, with
// their follow-up work (events, trigger times), and Precommit is inert afterwards.
func TestPrecommit(t *testing.T) {
	f := newFixture(t)
	f.State.OnServiceAdd(dptest.Service("ns1", "web", "172.30.0.10", dptest.WithPort("http", v1.ProtocolTCP, 80, 8080)))
	f.proxier.Precommit()
	f.State.AddEndpointSlice(dptest.Slice("ns1", "web", "web-1", 8080, "http", v1.ProtocolTCP, dptest.Ready("10.0.1.1", testNodeName)))
	f.proxier.Precommit()
	f.State.OnServiceAdd(dptest.Service("ns1", "dns", "172.30.0.53", dptest.WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	if f.nft.runs() != 0 {
		t.Fatal("Precommit wrote to the kernel")
	}
	f.sync()
	f.checkTableIsFullRender(testRenderConfig())
	if f.SvcHealth.Services == nil {
		t.Error("the first sync did not sync the health check services")
	}

	// After a sync, Precommit leaves changes to Sync.
	f.State.OnServiceDelete(dptest.Service("ns1", "dns", "172.30.0.53", dptest.WithPort("dns", v1.ProtocolUDP, 53, 5353)))
	f.proxier.Precommit()
	if services, _ := f.State.Pending(); services != 1 {
		t.Fatalf("after the first sync, Precommit consumed the model's pending changes (%d Service changes left, want 1)", services)
	}
	runs := f.nft.runs()
	f.sync()
	if f.nft.runs() != runs+1 {
		t.Fatal("the deletion was not applied by the sync after Precommit")
	}
	f.checkTableIsFullRender(testRenderConfig())
}

// The netlink writer takes every sync as typed operations.
var _ OpsRunner = (*nftnetlink.Executor)(nil)
