package config

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// TestClientGoGates: client-go's gates are known with client-go's defaults, and a
// value set on the command's gate set is what client-go sees through the adapter.
func TestClientGoGates(t *testing.T) {
	fg, err := NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	gates := ClientGoGates{Gates: fg}
	if !gates.Enabled(clientfeatures.WatchListClient) {
		t.Fatal("WatchListClient is on by default in client-go 0.37, as in upstream kube-proxy 1.37")
	}
	if err := fg.SetFromMap(map[string]bool{"WatchListClient": false}); err != nil {
		t.Fatalf("--feature-gates=WatchListClient=false refused: %v", err)
	}
	if gates.Enabled(clientfeatures.WatchListClient) {
		t.Fatal("WatchListClient=false did not reach client-go's view of the gates")
	}
}
