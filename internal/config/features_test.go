package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
)

// TestEveryUpstreamGateIsKnown: a gate list written for upstream kube-proxy (kubeadm
// copies the cluster's into the ConfigMap) must not stop the proxy.
func TestEveryUpstreamGateIsKnown(t *testing.T) {
	fg, err := NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	known := fg.GetAllVersioned()
	for name := range upstreamGates {
		if _, ok := known[name]; !ok {
			t.Errorf("upstream gate %s is not registered", name)
		}
	}
	for _, name := range []featuregate.Feature{"RuntimeClassInImageCriApi", "ControllerManagerReleaseLeaderElectionLockOnExit"} {
		if err := fg.SetFromMap(map[string]bool{string(name): true}); err != nil {
			t.Errorf("setting %s: %v", name, err)
		}
	}
	if err := fg.SetFromMap(map[string]bool{"NoSuchGate": true}); err == nil {
		t.Error("an unknown gate was accepted")
	}
}

// TestProxyGatesMatchUpstream: the gates kproxy registers itself carry upstream's
// exact history, so stages, defaults and locks cannot drift from the generated table.
func TestProxyGatesMatchUpstream(t *testing.T) {
	cmpVersion := cmp.Comparer(func(a, b *version.Version) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.EqualTo(b)
	})
	for name, specs := range proxyGates() {
		want, ok := upstreamGates[name]
		if !ok {
			t.Errorf("%s is not an upstream gate", name)
			continue
		}
		if diff := cmp.Diff(want, specs, cmpVersion); diff != "" {
			t.Errorf("%s differs from upstream (-upstream +kproxy):\n%s", name, diff)
		}
	}
}
