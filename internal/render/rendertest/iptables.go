package rendertest

import (
	"slices"
	"strings"
)

// KubeChains keeps, from iptables-save output of one table, the declarations and
// rules of the user chains named KUBE-* except skip (built-in chains, other
// software's chains and counters left out), as render/iptables' State.Dump prints
// them: what the iptables and ipvs renderers' tests compare with what they
// rendered.
func KubeChains(save string, skip ...string) string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		switch {
		case line == "", strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, ":"):
			name, rest, _ := strings.Cut(line[1:], " ")
			if strings.HasPrefix(rest, "-") && strings.HasPrefix(name, "KUBE-") && !slices.Contains(skip, name) {
				out = append(out, ":"+name+" - [0:0]")
			}
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(line[3:], " ")
			if strings.HasPrefix(chain, "KUBE-") {
				out = append(out, line)
			}
		default:
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\n"
}
