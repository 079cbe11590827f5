package iptables

import (
	"context"
	"net/netip"
	"testing"

	"github.com/kproxy/kproxy/internal/dataplane/dptest"
	"github.com/kproxy/kproxy/internal/dataplane/proxycore"
	"github.com/kproxy/kproxy/internal/iptables"
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
	defer f.ipt.FailAlways(iptables.OpRestore, nil)
	return f.proxier.Sync(ctx)
}

// FailNextSync fails every restore of the next Sync: a failed partial one and the
// full one that follows it.
func (f *fixture) FailNextSync() { f.ipt.FailAlways(iptables.OpRestore, errInjected) }

func (f *fixture) Writes() int { return f.ipt.Calls(iptables.OpRestore) }

func (f *fixture) LastWriteWasFull() bool { return f.lastWasFull() }

func (f *fixture) CheckFullRender(t *testing.T, nodePortIPs []netip.Addr) {
	t.Helper()
	cfg := testRenderConfig()
	if nodePortIPs != nil {
		cfg.NodePortAddresses.IPs = nodePortIPs
	}
	f.checkRulesAreFullRender(cfg)
}

func (f *fixture) Programmed() string {
	return f.ipt.Dump(iptables.TableFilter) + f.ipt.Dump(iptables.TableNAT)
}

func (f *fixture) Inspectable() proxycore.Inspectable { return f.proxier.Inspectable() }
