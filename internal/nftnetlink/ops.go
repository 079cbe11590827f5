package nftnetlink

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/nft"
)

// RunOps applies the typed operations ops yields (a full sync,
// render/nftables.FullOps) atomically, in one nfnetlink batch, as RunScript applies
// their text, with the same messages: rules go through encodeRule, tables, chains,
// sets, elements and counters through the encoders the text commands use. No text
// is written, except the failing command's when the kernel rejects the batch: ops
// is then iterated again to print it, so it must yield the same operations again.
// Options.LargeTransaction is called once ops has yielded LargeTransactionOps
// operations (a full sync), and its function once the batch was sent: the small
// transactions of partial syncs never call it.
func (e *Executor) RunOps(ctx context.Context, ops iter.Seq[nft.Op]) error {
	if hook := e.opts.LargeTransaction; hook != nil {
		var done func()
		defer func() {
			if done != nil {
				done()
			}
		}()
		inner := ops
		ops = func(yield func(nft.Op) bool) {
			n := 0
			for op := range inner {
				if n++; n == LargeTransactionOps && done == nil {
					done = hook(n)
				}
				if !yield(op) {
					return
				}
			}
		}
	}
	_, err := e.runOps(ctx, ops, false)
	return err
}

// RunOpsInventory is RunOps for operations that write the whole table (a full
// sync: render/nftables.FullOps or RefreshOps). Once the kernel committed the
// batch, it also returns the Inventory of the table the batch leaves, read from
// the batch's own messages as ApplyToInventory reads them, so it equals
// InventoryOf(ops) at the cost of the hashing alone: no second rendering and
// encoding of the table (at 10,000 Services, 0.35 s and 44 MB that the drift
// check's first comparison after a full sync otherwise spends under the sync
// lock). Objects the batch flushes or deletes that it did not add (a refresh's
// stale chains and sets) are not in the inventory, as in the kernel after it.
func (e *Executor) RunOpsInventory(ctx context.Context, ops iter.Seq[nft.Op]) (*Inventory, error) {
	return e.runOps(ctx, ops, true)
}

func (e *Executor) runOps(ctx context.Context, ops iter.Seq[nft.Op], inventory bool) (*Inventory, error) {
	var t *translator
	err := e.send(ctx, func(sock *socket) (*builder, error) {
		var err error
		t, err = e.buildOps(ops, sock, true)
		if err != nil {
			return nil, err
		}
		return t.b, nil
	}, func(ref commandRef) string { return e.opAt(ops, ref.Line) })
	if err != nil || !inventory {
		return nil, err
	}
	return t.inventory(), nil
}

// inventory reads the batch t built, applied to an empty table, into an
// Inventory. It consumes the batch: t's builder lets go of each chunk once it is
// read, and t of its rule cache, so that the collector can take the batch while
// the inventory grows. Both are live at the end of a full sync otherwise, the
// sync's peak heap (at 10,000 Services, an 18 MB batch and 8 MB of inventory on
// top of the rendered state: BenchmarkMemoryFullSync10k/inventory). The batch was
// sent and the kernel answered before: nothing reads it afterwards.
func (t *translator) inventory() *Inventory {
	inv := newInventory()
	r := &batchReader{inv: inv, anon: map[uint32]uint64{}, sizes: t.sets}
	t.rules, t.seen = nil, nil
	chunks := t.b.release()
	for i := range chunks {
		r.read(chunks[i])
		chunks[i] = nil
	}
	inv.setTypes = t.sets
	return inv
}

// buildOps translates ops into one batch (the translator's builder), as build
// does their text; an operation's commandRef is {0, its index}.
func (e *Executor) buildOps(ops iter.Seq[nft.Op], sock *socket, commit bool) (*translator, error) {
	t := e.newTranslator(sock)
	i := int32(0)
	for op := range ops {
		t.at = commandRef{Line: i}
		if err := t.op(&op); err != nil {
			return nil, fmt.Errorf("nftnetlink: %q: %w", e.opText(&op), err)
		}
		i++
	}
	t.end(commit)
	return t, nil
}

func (e *Executor) nftFamily() nft.Family {
	if e.family == "ip6" {
		return nft.IPv6
	}
	return nft.IPv4
}

// opText is the command text of op, for error reports.
func (e *Executor) opText(op *nft.Op) string {
	return strings.TrimSuffix(string(op.AppendText(nil, e.nftFamily(), e.table)), "\n")
}

// opAt is the text of operation i of ops.
func (e *Executor) opAt(ops iter.Seq[nft.Op], i int32) string {
	n := int32(0)
	for op := range ops {
		if n == i {
			return e.opText(&op)
		}
		n++
	}
	return ""
}

// op translates one operation.
func (t *translator) op(op *nft.Op) error {
	if op.Kind != nft.AddElement && op.Kind != nft.DeleteElement {
		t.flushElems()
		t.b.markCommand(t.at)
	}
	verb := "add"
	if op.Create {
		verb = "create"
	}
	switch op.Kind {
	case nft.AddTable:
		var ud udata
		if op.Comment != "" {
			var err error
			if ud, err = commentUdata(op.Comment); err != nil {
				return err
			}
		}
		t.newTable(verb, ud)
		return nil
	case nft.DeleteTable:
		t.deleteTable()
		return nil
	case nft.FlushTable:
		t.flushTable()
		return nil
	case nft.AddChain:
		var ud udata
		if op.Comment != "" {
			var err error
			if ud, err = commentUdata(op.Comment); err != nil {
				return err
			}
		}
		if h := op.Hook; h != nil {
			return t.newChain(verb, op.Name, h.Type, h.Hook, h.Priority, h.Policy, ud)
		}
		return t.newChain(verb, op.Name, "", "", "", "", ud)
	case nft.FlushChain:
		t.flushChain(op.Name)
		return nil
	case nft.DeleteChain:
		t.deleteChain(op.Name)
		return nil
	case nft.AddSet:
		sp, err := opSetSpec(op)
		if err != nil {
			return err
		}
		return t.newSet(verb, op.Name, op.IsMap, sp)
	case nft.FlushSet:
		t.flushSet(op.Name)
		return nil
	case nft.DeleteSet:
		t.deleteSet(op.Name)
		return nil
	case nft.AddRule:
		return t.opRule(op)
	case nft.AddElement:
		return t.opElement(verb, op)
	case nft.DeleteElement:
		info, err := t.set(op.Name)
		if err != nil {
			return err
		}
		return t.element("delete", op.Name, info, op.Key, "", nft.Elem{})
	case nft.AddCounter:
		t.newCounter(verb, op.Name, op.Packets, op.Bytes)
		return nil
	case nft.DeleteCounter:
		t.deleteCounter(op.Name)
		return nil
	}
	return fmt.Errorf("unsupported operation %d", op.Kind)
}

// setFlagBits are the kernel's bits of nft.SetFlags.
var setFlagBits = [...]struct {
	f   nft.SetFlags
	bit uint32
}{{nft.SetConstant, unix.NFT_SET_CONSTANT}, {nft.SetInterval, unix.NFT_SET_INTERVAL}, {nft.SetDynamic, unix.NFT_SET_EVAL}, {nft.SetTimeout, unix.NFT_SET_TIMEOUT}}

// opSetSpec is what AddSet says about the set.
func opSetSpec(op *nft.Op) (*setSpec, error) {
	sp := &setSpec{info: &setInfo{}, comment: op.Comment, gcInterval: op.GCInterval, size: uint64(op.Size), policy: op.Policy, automerge: op.AutoMerge}
	for _, fb := range setFlagBits {
		if op.Flags&fb.f != 0 {
			sp.info.flags |= fb.bit
		}
	}
	var err error
	switch t := op.Type; {
	case t == nil:
		err = fmt.Errorf("set without type")
	case t.IsTypeof():
		sp.info.key, sp.info.data, sp.typeofUdata, err = typeofSpec(t.KeyOf, t.DataOf, op.IsMap)
	default:
		err = sp.info.setType(t, op.IsMap)
	}
	if err != nil {
		return nil, err
	}
	if op.Timeout > 0 {
		// "flags dynamic,timeout ; timeout Ns", whole seconds as knftables writes.
		sp.info.flags |= unix.NFT_SET_EVAL | unix.NFT_SET_TIMEOUT
		sp.timeout = time.Duration(int64(op.Timeout.Seconds())) * time.Second
	}
	return sp, nil
}

// opElement translates AddElement (verb "add" or "create").
func (t *translator) opElement(verb string, op *nft.Op) error {
	info, err := t.set(op.Name)
	if err != nil {
		return err
	}
	return t.element(verb, op.Name, info, op.Key, op.Comment, op.Value)
}

// opRule translates AddRule, through the rule cache (rulecache.go): the rule's
// printed text is the key, the one text the typed path writes.
func (t *translator) opRule(op *nft.Op) error {
	t.ruleText = op.Rule.AppendText(t.ruleText[:0])
	if enc, ok := t.rules[string(t.ruleText)]; ok {
		t.writeCachedRule(op.Name, enc)
		return nil
	}
	r, err := encodeRule(t.family, op.Rule, t.newID)
	if err != nil {
		return err
	}
	enc, err := t.writeRule(op.Name, &r)
	if err != nil {
		return err
	}
	if len(r.anon) == 0 {
		t.storeRule(t.ruleText, enc)
	}
	return nil
}
