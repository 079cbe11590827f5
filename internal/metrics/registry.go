package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// NewRegistry returns the registry for New: kube-proxy's own families only
// (kubeproxy_* and kubernetes_build_info). It holds no Go runtime or process
// collector: those, like every family the component-base libraries define, live in
// the process-wide registry that NewGatherer merges in.
func NewRegistry() *prometheus.Registry {
	return prometheus.NewRegistry()
}

// NewGatherer returns what /metrics serves: the families of own (NewRegistry's)
// together with those of shared, the process-wide registry the component-base
// libraries register into (component-base's legacyregistry.DefaultGatherer in the
// daemon): the Go runtime and process collectors, client-go's rest_client_*,
// kubernetes_feature_enabled and the registry's own registered_metrics_total,
// disabled_metrics_total, hidden_metrics_total and
// cardinality_enforcement_unexpected_categorizations_total, as upstream's. A family
// present in both makes the scrape fail, so own must hold none of shared's.
func NewGatherer(own, shared prometheus.Gatherer) prometheus.Gatherer {
	if shared == nil {
		return own
	}
	return prometheus.Gatherers{shared, own}
}
