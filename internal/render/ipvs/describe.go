package ipvs

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Describe lists what f programs, one kernel object a line, in the notation of
// Dump (`ipvsadm -Ln` for virtual servers, `ipset save` entries, kube-ipvs0
// addresses, the sets named for family): what `kube-proxy explain` shows as a ServicePort's kernel objects.
func (f *Fragment) Describe(family v1.IPFamily) []string {
	var out []string
	for _, a := range f.Bind {
		out = append(out, "address "+a.String()+" on "+DummyDevice)
	}
	for i := range f.Services {
		var b strings.Builder
		writeService(&b, &f.Services[i])
		out = append(out, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")...)
	}
	for _, e := range f.Entries {
		out = append(out, "add "+SetName(e.Set, family)+" "+e.Entry)
	}
	return out
}
