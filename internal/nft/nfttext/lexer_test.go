package nfttext

import (
	"slices"
	"strings"
	"testing"
)

func TestAppendTokens(t *testing.T) {
	w := func(s string) Token { return Token{Text: s} }
	for _, tc := range []struct {
		in   string
		want []Token
	}{
		{`ip daddr . meta l4proto . th dport vmap @service-ips`,
			[]Token{w("ip"), w("daddr"), w("."), w("meta"), w("l4proto"), w("."), w("th"), w("dport"), w("vmap"), w("@service-ips")}},
		{`numgen random mod 2 vmap {0 : goto a/b__10.0.0.1/80, 1 : goto c}`,
			[]Token{w("numgen"), w("random"), w("mod"), w("2"), w("vmap"), w("{"), w("0"), w(":"), w("goto"), w("a/b__10.0.0.1/80"), w(","), w("1"), w(":"), w("goto"), w("c"), w("}")}},
		{`ct state established,related accept`, []Token{w("ct"), w("state"), w("established"), w(","), w("related"), w("accept")}},
		{`iifname "veth* x" dnat to [fd00::1]:80`, []Token{w("iifname"), {Text: "veth* x", Quoted: true}, w("dnat"), w("to"), w("[fd00::1]:80")}},
		{`add set ip t s { type ipv4_addr ; flags dynamic,timeout ; comment "a \"b\"" ; }`,
			[]Token{w("add"), w("set"), w("ip"), w("t"), w("s"), w("{"), w("type"), w("ipv4_addr"), w(";"), w("flags"), w("dynamic"), w(","), w("timeout"), w(";"), w("comment"), {Text: `a "b"`, Quoted: true}, w(";"), w("}")}},
	} {
		got, err := AppendTokens(nil, tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("AppendTokens(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := AppendTokens(nil, `iifname "eth0 drop`); err == nil || !strings.Contains(err.Error(), "unterminated string") {
		t.Errorf("unterminated string: got %v", err)
	}
}
