package iptables

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fuzz targets of iptables-save output, the kernel's rules as the iptables
// tools print them: ParseSave and ChainsInSave never panic, whatever they read, and
// SplitArgs reads back every argument SaveString quotes. Seeds: the iptables
// renderer's expected-output files and the tracer's saved listing; the corpus is in
// testdata/fuzz. `make fuzz` runs them (hack/fuzz.sh).

// saveSeeds are iptables-save texts of kproxy's rulesets.
func saveSeeds(f *testing.F) [][]byte {
	files, err := filepath.Glob("../render/iptables/testdata/*.iptables")
	if err != nil || len(files) == 0 {
		f.Fatalf("no expected-output files: %v", err)
	}
	files = append(files, "../trace/ipttrace/testdata/kproxy-nft-save-ipv4.txt")
	var out [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// FuzzParseSave: ParseSave fails or returns tables whose rules are of declared
// chains, each rule's arguments SplitArgs of its text; ChainsInSave (lenient)
// lists at least the chains ParseSave found.
func FuzzParseSave(f *testing.F) {
	for _, s := range saveSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("*nat\n:KUBE-SERVICES - [0:0]\n[5:300] -A KUBE-SERVICES -m comment --comment \"a \\\"b\\\"\" -j RETURN\nCOMMIT\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		chains := ChainsInSave(data)
		s, err := ParseSave(data)
		if err != nil {
			return
		}
		var strict []Chain
		for _, tb := range s.Tables {
			declared := map[Chain]bool{}
			for _, c := range tb.Chains {
				declared[c.Name] = true
				strict = append(strict, c.Name)
			}
			for _, r := range tb.Rules {
				if !declared[r.Chain] {
					t.Fatalf("rule of undeclared chain %s in table %s (line %d)", r.Chain, tb.Name, r.Line)
				}
				args, err := SplitArgs(r.Text)
				if err != nil || !slices.Equal(args, r.Args) {
					t.Fatalf("line %d: args %q, SplitArgs(%q) = %q, %v", r.Line, r.Args, r.Text, args, err)
				}
			}
		}
		if !slices.Equal(chains, strict) {
			t.Fatalf("ChainsInSave = %q, ParseSave's chains %q", chains, strict)
		}
	})
}

// FuzzSplitArgs: SplitArgs never panics, and arguments quoted with SaveString and
// joined by blanks split back into the same arguments.
func FuzzSplitArgs(f *testing.F) {
	for _, s := range saveSeeds(f) {
		for line := range strings.SplitSeq(string(s), "\n") {
			if strings.HasPrefix(line, "-A ") {
				f.Add(line)
			}
		}
	}
	f.Add(`-m comment --comment "a \"b\" c\\" -j ACCEPT`)
	f.Add(`""`)
	f.Add("\xdc\x00\xbb") // not UTF-8 alone, UTF-8 joined: bytes, not runes
	f.Fuzz(func(t *testing.T, line string) {
		args, err := SplitArgs(line)
		refArgs, refErr := splitArgsReference(line)
		if (err == nil) != (refErr == nil) || !slices.Equal(args, refArgs) {
			t.Fatalf("SplitArgs(%q) = %q, %v; the plain state machine says %q, %v", line, args, err, refArgs, refErr)
		}
		if err != nil {
			return
		}
		// The split arguments (and the line's words split at NULs, any text),
		// quoted, read back as themselves.
		for _, in := range [][]string{args, strings.Split(line, "\x00")} {
			quoted := make([]string, len(in))
			for i, a := range in {
				quoted[i] = SaveString(a)
			}
			again, err := SplitArgs(strings.Join(quoted, " "))
			if err != nil || !slices.Equal(again, in) {
				t.Fatalf("%q quoted as %q splits as %q, %v", in, quoted, again, err)
			}
		}
	})
}

// splitArgsReference is SplitArgs written plainly, a byte at a time into a
// builder (as it was before it learnt to return substrings): the fuzz target
// checks the two agree.
func splitArgsReference(line string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inQuote bool
		escaped bool
	)
	for i := range len(line) {
		c := line[i]
		switch {
		case inQuote && escaped:
			cur.WriteByte(c)
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case inQuote && c == '"':
			inQuote = false
			out = append(out, cur.String())
			cur.Reset()
		case inQuote:
			cur.WriteByte(c)
		case c == '"':
			inQuote = true
		case c == ' ' || c == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if inQuote {
		return nil, errUnterminatedQuote
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out, nil
}
