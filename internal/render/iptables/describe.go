package iptables

// Describe returns the fragment's rules, one line each, as iptables commands
// without the binary's name ("-t nat -N CHAIN", "-t nat -A CHAIN RULE"), for people
// (the state API, `kube-proxy explain`): first the chains it owns with their rules,
// then its entries in the shared chains. It is not iptables-restore input: the
// writers do not use it.
func (f *Fragment) Describe() []string {
	var out []string
	for _, c := range f.Chains {
		prefix := "-t " + string(c.Table) + " "
		out = append(out, prefix+"-N "+c.Name)
		for _, r := range c.Rules {
			out = append(out, prefix+"-A "+c.Name+" "+r)
		}
	}
	for _, e := range f.Entries {
		out = append(out, "-t "+string(e.Table)+" -A "+e.Chain+" "+e.Rule)
	}
	return out
}
