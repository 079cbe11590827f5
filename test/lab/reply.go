package lab

import (
	"fmt"
	"net/netip"
	"strings"
)

// Reply is what a lab backend answers: who answered and which client address it saw.
type Reply struct {
	Pod    string
	Client netip.AddrPort
}

// String renders the reply line (without newline).
func (r Reply) String() string { return fmt.Sprintf("pod=%s client=%s", r.Pod, r.Client) }

// ParseReply parses one reply line.
func ParseReply(line string) (Reply, error) {
	var r Reply
	var havePod, haveClient bool
	for _, f := range strings.Fields(strings.TrimSpace(line)) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Reply{}, fmt.Errorf("malformed reply %q", line)
		}
		switch k {
		case "pod":
			r.Pod, havePod = v, v != ""
		case "client":
			ap, err := netip.ParseAddrPort(v)
			if err != nil {
				return Reply{}, fmt.Errorf("malformed client in reply %q: %w", line, err)
			}
			r.Client, haveClient = ap, true
		}
	}
	if !havePod || !haveClient {
		return Reply{}, fmt.Errorf("incomplete reply %q", line)
	}
	return r, nil
}
