package nfttext

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/nft"
)

// The fuzz targets of nft text, kernel output (ParseListing) and the commands of
// knftables transactions (CommandParser, ParseRule, ParseElem): whatever the text,
// a parser returns an error, never panics, and what it reads prints back as text
// that reads as the same thing. Seeds: the renderer's expected-output files (one
// command per line) and this package's test listing; the corpus is in
// testdata/fuzz. `make fuzz` runs them (hack/fuzz.sh).

// goldenLines returns up to max lines of the nftables renderer's expected-output
// files, the commands kproxy writes.
func goldenLines(f *testing.F, max int) []string {
	files, err := filepath.Glob("../../render/nftables/testdata/*.nft")
	if err != nil || len(files) == 0 {
		f.Fatalf("no expected-output files: %v", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if line == "" || seen[line] || len(out) >= max {
				continue
			}
			seen[line] = true
			out = append(out, line)
		}
	}
	return out
}

// ruleText is the rule part of an "add rule ip kube-proxy CHAIN RULE" line.
func ruleText(line string) (string, bool) {
	fields := strings.SplitN(line, " ", 6)
	if len(fields) < 6 || fields[0] != "add" || fields[1] != "rule" {
		return "", false
	}
	return fields[5], true
}

// FuzzParseRule: a rule that parses and lowers prints (nft.Rule's printer) as text
// that parses and lowers to an equal rule.
func FuzzParseRule(f *testing.F) {
	for _, line := range goldenLines(f, 400) {
		if r, ok := ruleText(line); ok {
			f.Add(r)
		}
	}
	for _, r := range []string{
		`ip daddr . meta l4proto . th dport vmap @service-ips comment "x y"`,
		`mark and 0x4000 != 0 meta mark set meta mark | 0x10 mark set 7`,
		`numgen random mod 2 offset 1 vmap { 1 : goto a , 2 : drop }`,
		`meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport map @m`,
		`dnat to [fd00::1]:80 persistent,random`,
		`fib daddr . iif type local counter name "c" reject with icmp type port-unreachable`,
		`iifname "veth*" log prefix "p" flags all counter packets 1 bytes 2 continue`,
	} {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseRule(text)
		if err != nil {
			return
		}
		for _, fam := range []nft.Family{nft.IPv4, nft.IPv6} {
			lowered, err := Lower(r, fam)
			if err != nil {
				continue
			}
			printed := lowered.String()
			again, err := ParseRule(printed)
			if err != nil {
				t.Fatalf("%q lowers to %q, which does not parse: %v", text, printed, err)
			}
			loweredAgain, err := Lower(again, fam)
			if err != nil {
				t.Fatalf("%q lowers to %q, which does not lower: %v", text, printed, err)
			}
			if !lowered.Equal(loweredAgain) {
				t.Fatalf("%q lowers to %q, which reads back as %q", text, printed, loweredAgain.String())
			}
		}
	})
}

// FuzzCommand: a command that parses prints (nft.Op.AppendText) as a line that
// parses to a command printing the same line.
func FuzzCommand(f *testing.F) {
	for _, line := range goldenLines(f, 600) {
		f.Add(line)
	}
	f.Add(`add table ip6 kube-proxy { comment "rules for kube-proxy" ; }`)
	f.Add(`add counter ip kube-proxy n { packets 5 bytes 300 ; }`)
	f.Add(`delete element ip kube-proxy m { fd00::1 . tcp . 80 }`)
	f.Fuzz(func(t *testing.T, line string) {
		var p CommandParser
		cmd, err := p.Parse(line)
		if err != nil {
			return
		}
		for _, e := range []nft.Elem{cmd.Op.Key, cmd.Op.Value} {
			if hasIfname(e) {
				return // see FuzzParseElem
			}
		}
		printed := strings.TrimSuffix(string(cmd.Op.AppendText(nil, cmd.Family, cmd.Table)), "\n")
		again, err := p.Parse(printed)
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", line, printed, err)
		}
		if again.Family != cmd.Family || again.Table != cmd.Table {
			t.Fatalf("%q prints as %q, which reads back as another table (%v %q)", line, printed, again.Family, again.Table)
		}
		if reprinted := strings.TrimSuffix(string(again.Op.AppendText(nil, again.Family, again.Table)), "\n"); reprinted != printed {
			t.Fatalf("%q prints as %q, which reads back as %q", line, printed, reprinted)
		}
	})
}

// FuzzParseElem: an element that parses (without interface names) prints as
// text that parses to the same element.
func FuzzParseElem(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "fd00::1 . tcp . 80", "10.0.0.1 . 80", `"eth0" . udp`, "goto svc-x", "drop", "1.2.3.4 . 6 . 65535", "10.0.0.0/8", "10.0.0.1-10.0.0.9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		e, err := ParseElem(text)
		if err != nil {
			return
		}
		if hasIfname(e) {
			return
		}
		printed := e.String()
		again, err := ParseElem(printed)
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", text, printed, err)
		}
		if again != e {
			t.Fatalf("%q prints as %q, which reads back as %q", text, printed, again.String())
		}
	})
}

// FuzzParseListing: the kernel's listing of a table (`nft list table`) never
// panics the reader, and every rule it lists comes with its syntax tree.
func FuzzParseListing(f *testing.F) {
	f.Add(kernelListing)
	f.Add("table ip kube-proxy {\n}\n")
	f.Add("table ip6 kube-proxy {\n\tchain c {\n\t\ttype nat hook prerouting priority dstnat - 10; policy accept;\n\t\tip6 daddr fd00::1 counter packets 0 bytes 0 drop\n\t}\n}\n")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := ParseListing(text)
		if err != nil {
			return
		}
		for _, tb := range l.Tables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					if r.Rule == nil {
						t.Fatalf("rule %q of chain %s listed without its syntax tree", r.Text, c.Name)
					}
				}
			}
		}
	})
}

// hasIfname: e has an interface name field. Interface names print bare, so "tcp",
// "" or "a b" would not read back as the name; kproxy's elements hold none.
func hasIfname(e nft.Elem) bool {
	for _, fl := range e.AppendFields(nil) {
		if fl.Kind == nft.FieldIfname {
			return true
		}
	}
	return false
}
