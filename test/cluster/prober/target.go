package prober

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Protocol is the transport a target is probed over.
type Protocol string

const (
	TCP Protocol = "tcp"
	UDP Protocol = "udp"
)

// Target is one address probed over one protocol.
type Target struct {
	Protocol Protocol
	Addr     netip.AddrPort
}

// ParseTarget parses tcp://IP:PORT or udp://IP:PORT (IPv6 in brackets). The host must be
// an IP literal and the port non-zero; nothing may follow the port.
func ParseTarget(s string) (Target, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: %w", s, err)
	}
	p := Protocol(strings.ToLower(u.Scheme))
	if p != TCP && p != UDP {
		return Target{}, fmt.Errorf("target %q: scheme must be tcp or udp", s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Target{}, fmt.Errorf("target %q: want %s://IP:PORT and nothing else", s, p)
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: host must be IP:PORT (IPv6 in brackets): %w", s, err)
	}
	if ap.Port() == 0 {
		return Target{}, fmt.Errorf("target %q: port must not be 0", s)
	}
	return NewTarget(p, ap), nil
}

// ParseTargets parses each of ss with ParseTarget.
func ParseTargets(ss []string) ([]Target, error) {
	ts := make([]Target, 0, len(ss))
	for _, s := range ss {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// NewTarget is the target of p at ap (an IPv4-mapped IPv6 address is taken as IPv4).
func NewTarget(p Protocol, ap netip.AddrPort) Target {
	return Target{Protocol: p, Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
}

// String is the target's URL: tcp://10.96.0.5:80, udp://[fd00:10:96::5]:80.
func (t Target) String() string { return string(t.Protocol) + "://" + t.Addr.String() }

// Family is "IPv4" or "IPv6".
func (t Target) Family() string {
	if t.Addr.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// network is the Go network name for dialing the target in its own family only.
func (t Target) network() string {
	if t.Addr.Addr().Is4() {
		return string(t.Protocol) + "4"
	}
	return string(t.Protocol) + "6"
}
