package nftables

import (
	"iter"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// FullScript yields FullOps as nft command text (nft.Op.AppendText), in pieces of
// about partBytes that end at a line break, for a writer that applies a sequence
// of texts as one transaction (nftnetlink.Executor.RunScript). The concatenated
// pieces are byte for byte the text knftables writes for WriteFull's transaction
// (tx.String(): the executor's contract with knftables;
// TestFullScriptIsWriteFullText holds the two together), and only one piece
// exists at a time. Every iteration yields the same pieces.
func FullScript(s *State, family knftables.Family, partBytes int) iter.Seq[string] {
	return script(FullOps(s), family, partBytes)
}

// RefreshScript is FullScript for WriteRefresh's transaction.
func RefreshScript(s *State, existing *Existing, family knftables.Family, partBytes int) iter.Seq[string] {
	return script(RefreshOps(s, existing), family, partBytes)
}

func script(ops iter.Seq[nft.Op], family knftables.Family, partBytes int) iter.Seq[string] {
	f := nftFamily(family)
	return func(yield func(string) bool) {
		buf := make([]byte, 0, partBytes+partBytes/8)
		for op := range ops {
			buf = op.AppendText(buf, f, TableName)
			if len(buf) >= partBytes {
				if !yield(string(buf)) {
					return
				}
				buf = buf[:0]
			}
		}
		if len(buf) > 0 {
			yield(string(buf))
		}
	}
}

func nftFamily(f knftables.Family) nft.Family {
	if f == knftables.IPv6Family {
		return nft.IPv6
	}
	return nft.IPv4
}
