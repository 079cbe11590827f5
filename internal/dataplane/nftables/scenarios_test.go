package nftables

import (
	"context"
	"net/netip"
	"testing"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
)

// TestSharedScenarios runs the scenarios every mode's proxier must pass alike.
func TestSharedScenarios(t *testing.T) {
	dptest.RunScenarios(t, func(t *testing.T, mutate func(*proxycore.Config)) dptest.Fixture {
		return newFixture(t, func(c *Config) {
			if mutate != nil {
				mutate(&c.Config)
			}
		})
	})
}

// The dptest.Fixture methods.

func (f *fixture) Sync(ctx context.Context) (bool, error) {
	defer func() { f.nft.mu.Lock(); f.nft.failAll = false; f.nft.mu.Unlock() }()
	return f.proxier.Sync(ctx)
}

func (f *fixture) FailNextSync() { f.nft.mu.Lock(); f.nft.failAll = true; f.nft.mu.Unlock() }

func (f *fixture) Writes() int { return f.nft.runs() }

func (f *fixture) LastWriteWasFull() bool { return f.lastWasFullRewrite() }

func (f *fixture) CheckFullRender(t *testing.T, nodePortIPs []netip.Addr) {
	t.Helper()
	cfg := testRenderConfig()
	if nodePortIPs != nil {
		cfg.NodePortAddresses.IPs = nodePortIPs
	}
	f.checkTableIsFullRender(cfg)
}

func (f *fixture) Programmed() string { return f.nft.Dump() }

func (f *fixture) Inspectable() proxycore.Inspectable { return f.proxier.Inspectable() }
