package ipvs

import (
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
