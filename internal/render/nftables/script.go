package nftables

import (
	"iter"
	"strconv"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// FullOps yields the full sync of s (WriteFull's transaction) as typed operations,
// for a writer that encodes them directly (nftnetlink.Executor.RunOps): at 10,000
// Services a full sync is ~140,000 operations, and building a knftables object for
// each, or its text, costs more than encoding it. Every iteration yields the same
// operations.
func FullOps(s *State, family knftables.Family) iter.Seq[nft.Op] { return s.ops(nil, family) }

// RefreshOps is FullOps for WriteRefresh's transaction: the table, which holds
// existing, is kept, and so is session-affinity memory.
func RefreshOps(s *State, existing *Existing, family knftables.Family) iter.Seq[nft.Op] {
	if existing == nil {
		existing = &Existing{}
	}
	return s.ops(existing, family)
}

// FullScript yields FullOps as nft command text (nft.Op.AppendText), in pieces of
// about partBytes that end at a line break, for a writer that applies a sequence
// of texts as one transaction (nftnetlink.Executor.RunScript). The concatenated
// pieces are byte for byte the text knftables writes for WriteFull's transaction
// (tx.String(): the executor's contract with knftables;
// TestFullScriptIsWriteFullText holds the two together), and only one piece
// exists at a time. Every iteration yields the same pieces.
func FullScript(s *State, family knftables.Family, partBytes int) iter.Seq[string] {
	return script(s.ops(nil, family), family, partBytes)
}

// RefreshScript is FullScript for WriteRefresh's transaction.
func RefreshScript(s *State, existing *Existing, family knftables.Family, partBytes int) iter.Seq[string] {
	return script(RefreshOps(s, existing, family), family, partBytes)
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

func (s *State) ops(existing *Existing, family knftables.Family) iter.Seq[nft.Op] {
	return func(yield func(nft.Op) bool) {
		stopped := false
		s.fullOps(existing, func(op fullOp) {
			if !stopped {
				stopped = !yield(op.nftOp(family))
			}
		})
	}
}

func nftFamily(f knftables.Family) nft.Family {
	if f == knftables.IPv6Family {
		return nft.IPv6
	}
	return nft.IPv4
}

// nftOp is op as a typed operation.
func (op *fullOp) nftOp(family knftables.Family) nft.Op {
	switch op.kind {
	case opAddTable:
		return nft.Op{Kind: nft.AddTable, Comment: TableComment}
	case opDeleteTable:
		return nft.Op{Kind: nft.DeleteTable}
	case opAddChain:
		c := op.chain
		return nft.Op{Kind: nft.AddChain, Name: c.Name, Comment: c.Comment, Hook: c.Hook.nftHook(family)}
	case opAddContainer:
		c := op.container
		o := nft.Op{Kind: nft.AddSet, Name: c.Name, IsMap: c.IsMap, Type: c.Type, TypeOf: c.TypeOf, Comment: c.Comment}
		if !c.IsMap {
			o.Timeout = c.Timeout
		}
		return o
	case opAddRule:
		return nft.Op{Kind: nft.AddRule, Name: op.chain.Name, Rule: op.rule}
	case opAddElement:
		return nft.Op{Kind: nft.AddElement, Name: op.id.container, IsMap: op.claim.value != "",
			Key: op.id.key, Value: op.claim.value, Comment: op.claim.comment}
	case opFlushChain:
		return nft.Op{Kind: nft.FlushChain, Name: op.name}
	case opDeleteChain:
		return nft.Op{Kind: nft.DeleteChain, Name: op.name}
	case opFlushContainer:
		return nft.Op{Kind: nft.FlushSet, Name: op.name, IsMap: op.isMap}
	case opDeleteContainer:
		return nft.Op{Kind: nft.DeleteSet, Name: op.name, IsMap: op.isMap}
	case opAddCounter:
		return nft.Op{Kind: nft.AddCounter, Name: op.counter.Name}
	}
	return nft.Op{Kind: nft.DeleteCounter, Name: op.name}
}

// nftHook is h as nft names it (nil for a regular chain). The priority is a number
// when knftables can compute it, as knftables writes it (older nft binaries do not
// accept every named priority with every hook).
func (h *BaseChain) nftHook(family knftables.Family) *nft.Hook {
	if h == nil {
		return nil
	}
	prio := string(h.Priority)
	if n, err := knftables.ParsePriority(family, prio); err == nil {
		prio = strconv.Itoa(n)
	}
	return &nft.Hook{Type: string(h.Type), Hook: string(h.Hook), Priority: prio}
}
