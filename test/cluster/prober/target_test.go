package prober

import (
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, want, network, family string
	}{
		{"tcp://10.96.0.5:80", "tcp://10.96.0.5:80", "tcp4", "IPv4"},
		{"udp://10.96.0.5:80", "udp://10.96.0.5:80", "udp4", "IPv4"},
		{"tcp://[fd00:10:96::5]:80", "tcp://[fd00:10:96::5]:80", "tcp6", "IPv6"},
		{"UDP://[FD00:10:96::5]:8081/", "udp://[fd00:10:96::5]:8081", "udp6", "IPv6"},
		{"tcp://[::ffff:192.0.2.1]:30080", "tcp://192.0.2.1:30080", "tcp4", "IPv4"},
	} {
		got, err := ParseTarget(tc.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
			continue
		}
		if got.String() != tc.want || got.network() != tc.network || got.Family() != tc.family {
			t.Errorf("ParseTarget(%q) = %s (%s, %s), want %s (%s, %s)", tc.in, got, got.network(), got.Family(), tc.want, tc.network, tc.family)
		}
		again, err := ParseTarget(got.String())
		if err != nil || again != got {
			t.Errorf("ParseTarget(%q) does not round-trip: %v, %v", got.String(), again, err)
		}
	}
}

func TestParseTargetRejects(t *testing.T) {
	for _, in := range []string{
		"", "10.96.0.5:80", "http://10.96.0.5:80", "sctp://10.96.0.5:80",
		"tcp://10.96.0.5", "tcp://10.96.0.5:0", "tcp://fd00::5:80", "tcp://example.com:80",
		"tcp://10.96.0.5:80/hostname", "tcp://10.96.0.5:80?x=1", "tcp://u@10.96.0.5:80", "tcp://10.96.0.5:99999",
	} {
		if got, err := ParseTarget(in); err == nil {
			t.Errorf("ParseTarget(%q) = %v, want an error", in, got)
		}
	}
	if _, err := ParseTargets([]string{"tcp://10.0.0.1:80", "bogus"}); err == nil {
		t.Error("ParseTargets with a bad target: want an error")
	}
}
