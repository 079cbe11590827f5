package config

import (
	"fmt"

	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
)

// ClientGoGates adapts a gate set to client-go's feature gates (WatchListClient,
// InformerResourceVersion, ...). Upstream kube-proxy's --feature-gates and
// featureGates reach client-go because its gate set is installed as client-go's;
// the command does the same with clientfeatures.ReplaceFeatureGates(ClientGoGates{fg}),
// once, before any client is built (client-go reads its gates from a process-wide
// variable that only the command may set).
type ClientGoGates struct{ Gates featuregate.FeatureGate }

// Enabled implements clientfeatures.Gates.
func (g ClientGoGates) Enabled(key clientfeatures.Feature) bool {
	return g.Gates.Enabled(featuregate.Feature(key))
}

// addClientGoGates registers client-go's gates, with client-go's own specs, in fg.
func addClientGoGates(fg featuregate.MutableVersionedFeatureGate) error {
	return clientfeatures.AddVersionedFeaturesToExistingFeatureGates(clientGoRegistry{fg})
}

type clientGoRegistry struct {
	fg featuregate.MutableVersionedFeatureGate
}

func (r clientGoRegistry) AddVersioned(in map[clientfeatures.Feature]clientfeatures.VersionedSpecs) error {
	out := make(map[featuregate.Feature]featuregate.VersionedSpecs, len(in))
	for name, specs := range in {
		converted := make(featuregate.VersionedSpecs, 0, len(specs))
		for _, s := range specs {
			spec := featuregate.FeatureSpec{Default: s.Default, LockToDefault: s.LockToDefault, Version: s.Version}
			switch s.PreRelease {
			case clientfeatures.Alpha:
				spec.PreRelease = featuregate.Alpha
			case clientfeatures.Beta:
				spec.PreRelease = featuregate.Beta
			case clientfeatures.GA:
				spec.PreRelease = featuregate.GA
			case clientfeatures.Deprecated:
				spec.PreRelease = featuregate.Deprecated
			default:
				return fmt.Errorf("client-go feature gate %s: unknown maturity %q", name, s.PreRelease)
			}
			converted = append(converted, spec)
		}
		out[featuregate.Feature(name)] = converted
	}
	if err := r.fg.AddVersioned(out); err != nil {
		return fmt.Errorf("registering client-go feature gates: %w", err)
	}
	return nil
}
