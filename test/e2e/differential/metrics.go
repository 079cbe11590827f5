package differential

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricFamilies parses a /metrics text exposition into family name -> signature:
// the type and the sorted label names used by any of its series ("le" and
// "quantile" are not labels in the parsed form). Label values, series counts and
// sample values are not compared: they depend on timing.
func MetricFamilies(r io.Reader) (map[string]string, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(fams))
	for name, f := range fams {
		out[name] = signature(f)
	}
	return out, nil
}

func signature(f *dto.MetricFamily) string {
	labels := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = true
		}
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s [%s]", strings.ToLower(f.GetType().String()), strings.Join(names, ","))
}

// DiffMetrics reports every family upstream exposes that ours lacks or exposes with
// another type or other label names. Families only ours exposes are not differences.
func DiffMetrics(name string, upstream, ours map[string]string) []Difference {
	var out []Difference
	for _, fam := range sortedKeys(upstream) {
		u := upstream[fam]
		o, ok := ours[fam]
		if !ok {
			o = absent
		}
		if o != u {
			out = append(out, Difference{Case: name, Aspect: AspectMetrics, Key: fam, Upstream: u, Ours: o})
		}
	}
	return out
}
