package iptables

import "testing"

func TestSaveString(t *testing.T) {
	for in, want := range map[string]string{
		"abc_DEF-1":    "abc_DEF-1",
		"ns1/svc1:p80": `"ns1/svc1:p80"`,
		`it's "q" \`:   `"it\'s \"q\" \\"`,
		"":             `""`,
	} {
		if got := SaveString(in); got != want {
			t.Errorf("SaveString(%q) = %s, want %s", in, got, want)
		}
	}
}
