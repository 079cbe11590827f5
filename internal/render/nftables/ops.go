package nftables

import (
	"iter"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// The renderer's output is nft.Op: full syncs (FullOps, RefreshOps) and partial
// syncs (Plan.Ops) alike. A writer encodes the operations (internal/nftnetlink),
// prints them (nft.Op.AppendText, FullScript), or, for a knftables.Interface such
// as the nft binary's or a Fake, adds them to a knftables transaction (AddOps).
// This file is the one place that turns fragments into operations.

func tableOp() nft.Op { return nft.Op{Kind: nft.AddTable, Comment: TableComment} }

// addOp is the operation creating c (its rules are separate AddRule operations).
func (c *Chain) addOp() nft.Op {
	return nft.Op{Kind: nft.AddChain, Name: c.Name, Comment: c.Comment, Hook: c.Hook.nftHook()}
}

func chainOp(kind nft.OpKind, name string) nft.Op { return nft.Op{Kind: kind, Name: name} }

func ruleOp(chain string, r *Rule) nft.Op { return nft.Op{Kind: nft.AddRule, Name: chain, Rule: r} }

// addOp is the operation creating c.
func (c *Container) addOp() nft.Op {
	o := nft.Op{Kind: nft.AddSet, Name: c.Name, IsMap: c.IsMap, Type: c.Type, Comment: c.Comment}
	if !c.IsMap {
		o.Timeout = c.Timeout
	}
	return o
}

func containerOp(kind nft.OpKind, name string, isMap bool) nft.Op {
	return nft.Op{Kind: kind, Name: name, IsMap: isMap}
}

// elementOp adds the element id holding c. Whether the container is a map
// follows from the claim: set elements have no value.
func elementOp(id elementID, c claim) nft.Op {
	return nft.Op{Kind: nft.AddElement, Name: id.container, IsMap: !c.value.IsZero(), Key: id.key, Value: c.value, Comment: c.comment}
}

// deleteElementOp deletes the element id (holding c): by key only.
func deleteElementOp(id elementID, c claim) nft.Op {
	return nft.Op{Kind: nft.DeleteElement, Name: id.container, IsMap: !c.value.IsZero(), Key: id.key}
}

func counterOp(kind nft.OpKind, name string) nft.Op { return nft.Op{Kind: kind, Name: name} }

// nftHook is h as nft names it (nil for a regular chain). The priority is a number
// when knftables can compute it, as knftables writes it (older nft binaries do not
// accept every named priority with every hook). The numbers of the named
// priorities are the same in the ip and ip6 families (only bridge differs).
func (h *BaseChain) nftHook() *nft.Hook {
	if h == nil {
		return nil
	}
	prio := string(h.Priority)
	if n, err := knftables.ParsePriority(knftables.IPv4Family, prio); err == nil {
		prio = strconv.Itoa(n)
	}
	return &nft.Hook{Type: string(h.Type), Hook: string(h.Hook), Priority: prio}
}

// AddOps adds ops to tx as knftables objects, for a writer that takes knftables
// transactions (the nft binary's knftables.Interface, a knftables.Fake): knftables
// then writes the text nft.Op.AppendText prints (TestFullScriptIsWriteFullText).
func AddOps(tx *knftables.Transaction, ops iter.Seq[nft.Op]) {
	for op := range ops {
		addOp(tx, &op)
	}
}

func addOp(tx *knftables.Transaction, o *nft.Op) {
	switch o.Kind {
	case nft.AddTable:
		t := &knftables.Table{}
		if o.Comment != "" {
			t.Comment = knftables.PtrTo(o.Comment)
		}
		tx.Add(t)
	case nft.DeleteTable:
		tx.Delete(&knftables.Table{})
	case nft.AddChain:
		c := &knftables.Chain{Name: o.Name}
		if o.Comment != "" {
			c.Comment = knftables.PtrTo(o.Comment)
		}
		if h := o.Hook; h != nil {
			c.Type = knftables.PtrTo(knftables.BaseChainType(h.Type))
			c.Hook = knftables.PtrTo(knftables.BaseChainHook(h.Hook))
			c.Priority = knftables.PtrTo(knftables.BaseChainPriority(h.Priority))
		}
		tx.Add(c)
	case nft.FlushChain:
		tx.Flush(&knftables.Chain{Name: o.Name})
	case nft.DeleteChain:
		tx.Delete(&knftables.Chain{Name: o.Name})
	case nft.AddSet:
		tx.Add(containerObject(o))
	case nft.FlushSet:
		tx.Flush(containerObject(&nft.Op{Name: o.Name, IsMap: o.IsMap}))
	case nft.DeleteSet:
		tx.Delete(containerObject(&nft.Op{Name: o.Name, IsMap: o.IsMap}))
	case nft.AddRule:
		r := &knftables.Rule{Chain: o.Name, Rule: o.Rule.Statements()}
		if o.Rule.Comment != "" {
			r.Comment = knftables.PtrTo(o.Rule.Comment)
		}
		tx.Add(r)
	case nft.AddElement:
		e := elementObject(o)
		if o.IsMap {
			e.Value = []string{o.Value.String()}
		}
		if o.Comment != "" {
			e.Comment = knftables.PtrTo(o.Comment)
		}
		tx.Add(e)
	case nft.DeleteElement:
		tx.Delete(elementObject(o))
	case nft.AddCounter:
		tx.Add(&knftables.Counter{Name: o.Name})
	case nft.DeleteCounter:
		tx.Delete(&knftables.Counter{Name: o.Name})
	}
}

// containerObject is the set or map of AddSet o (or, with only a name, one to
// flush or delete).
func containerObject(o *nft.Op) knftables.Object {
	var comment *string
	if o.Comment != "" {
		comment = knftables.PtrTo(o.Comment)
	}
	var typ, typeOf string
	if t := o.Type; t != nil && t.IsTypeof() {
		typeOf = t.Text()
	} else if t != nil {
		typ = t.Text()
	}
	if o.IsMap {
		return &knftables.Map{Name: o.Name, Type: typ, TypeOf: typeOf, Comment: comment}
	}
	s := &knftables.Set{Name: o.Name, Type: typ, TypeOf: typeOf, Comment: comment}
	if o.Timeout > 0 {
		// "dynamic" is set explicitly: some kernels add it implicitly to sets
		// updated from the packet path, and a later "add" without it would then
		// look like an attempt to change the flags.
		s.Flags = []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag}
		s.Timeout = knftables.PtrTo(o.Timeout)
	}
	return s
}

// elementObject is o's element, named by its key.
func elementObject(o *nft.Op) *knftables.Element {
	e := &knftables.Element{Key: strings.Split(o.Key.String(), " . ")}
	if o.IsMap {
		e.Map = o.Name
	} else {
		e.Set = o.Name
	}
	return e
}
