package nftables

import "strings"

// Describe returns the fragment's objects as nft text, one line each, for people
// (the state API, `kube-proxy explain`): each chain as "chain NAME", its rules
// indented under it, then each set or map it owns as "set NAME" or "map NAME", then
// each element as "element CONTAINER { KEY }" or "{ KEY : VALUE }". It is not a
// script: the renderer's writers do not use it.
func (f *Fragment) Describe() []string {
	var out []string
	var b strings.Builder
	for i := range f.Chains {
		c := &f.Chains[i]
		out = append(out, "chain "+c.Name)
		for j := range c.Rules {
			out = append(out, "\t"+c.Rules[j].String())
		}
	}
	for _, c := range f.Containers {
		kind := "set "
		if c.IsMap {
			kind = "map "
		}
		out = append(out, kind+c.Name)
	}
	for _, e := range f.Elements {
		b.Reset()
		b.WriteString("element ")
		b.WriteString(e.Container)
		b.WriteString(" { ")
		b.WriteString(e.Key.String())
		if !e.Value.IsZero() {
			b.WriteString(" : ")
			b.WriteString(e.Value.String())
		}
		b.WriteString(" }")
		out = append(out, b.String())
	}
	return out
}
