package lab

import (
	"net/netip"
	"testing"
)

func TestParseReply(t *testing.T) {
	tests := []struct {
		line    string
		want    Reply
		wantErr bool
	}{
		{"pod=node1-pod1 client=10.244.1.3:41234\n", Reply{"node1-pod1", netip.MustParseAddrPort("10.244.1.3:41234")}, false},
		{"pod=p client=[fd00:10:244:1::3]:80", Reply{"p", netip.MustParseAddrPort("[fd00:10:244:1::3]:80")}, false},
		{"client=1.2.3.4:5", Reply{}, true},
		{"pod=p", Reply{}, true},
		{"pod=p client=nonsense", Reply{}, true},
		{"garbage", Reply{}, true},
		{"", Reply{}, true},
	}
	for _, tc := range tests {
		got, err := ParseReply(tc.line)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseReply(%q) error = %v, wantErr %v", tc.line, err, tc.wantErr)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseReply(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
		if err == nil {
			if back, _ := ParseReply(got.String()); back != got {
				t.Errorf("round trip of %q: %+v", got.String(), back)
			}
		}
	}
}
