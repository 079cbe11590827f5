package ipset

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseSave: `ipset save` output, what the kernel's sets hold, is read or
// refused, never panics the reader; what it reads holds every entry of every
// "add" line, sorted per set. Seeds: this package's save output and plans; the
// corpus is in testdata/fuzz. `make fuzz` runs it (hack/fuzz.sh).
func FuzzParseSave(f *testing.F) {
	f.Add([]byte(saveOutput))
	f.Add([]byte("create KUBE-X hash:ip family inet hashsize 1024 maxelem 65536\nadd KUBE-X 10.0.0.1\n"))
	f.Add([]byte("create KUBE-6-IPVS-IPS hash:ip family inet6 hashsize 1024 maxelem 65536\nadd KUBE-6-IPVS-IPS fd00::1\nadd KUBE-Y 30080 timeout 5\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		sets, err := ParseSave(out)
		if err != nil {
			return
		}
		adds := 0
		for line := range strings.SplitSeq(string(out), "\n") {
			if fields := strings.Fields(line); len(fields) > 0 && fields[0] == "add" {
				adds++
				if !slices.Contains(sets[fields[1]], fields[2]) {
					t.Fatalf("entry %q of set %q missing from %q", fields[2], fields[1], sets[fields[1]])
				}
			}
		}
		n := 0
		for name, entries := range sets {
			if !slices.IsSorted(entries) {
				t.Fatalf("set %q: entries not sorted: %q", name, entries)
			}
			n += len(entries)
		}
		if n != adds {
			t.Fatalf("%d entries read from %d add lines", n, adds)
		}
	})
}
