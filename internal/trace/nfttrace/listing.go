package nfttrace

import (
	"fmt"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
)

// FromListing loads the kernel's listing of tables (`nft list table …`, parsed by
// nfttext.ParseListing) into a Fake a Tracer evaluates, so a node's live ruleset
// and a renderer's transactions are traced by the same interpreter. Every rule
// keeps the kernel's spelling (the tracer parses it again, through the same
// parser); set and map elements keep their words, a verdict as one word.
func FromListing(l *nfttext.Listing) (*knftables.Fake, error) {
	fake := knftables.NewFake("", "")
	fake.Tables = map[knftables.Family]map[string]*knftables.FakeTable{}
	for i := range l.Tables {
		lt := &l.Tables[i]
		fam := knftables.Family(lt.Family)
		switch fam {
		case knftables.IPv4Family, knftables.IPv6Family, knftables.InetFamily:
		default:
			continue // no packet the tracer follows crosses arp, bridge or netdev tables
		}
		tbl := &knftables.FakeTable{
			Table:    knftables.Table{Family: fam, Name: lt.Name},
			Chains:   map[string]*knftables.FakeChain{},
			Sets:     map[string]*knftables.FakeSet{},
			Maps:     map[string]*knftables.FakeMap{},
			Counters: map[string]*knftables.FakeCounter{},
		}
		if lt.Comment != "" {
			tbl.Comment = &lt.Comment
		}
		for j := range lt.Chains {
			ch, err := fakeChain(fam, lt.Name, &lt.Chains[j])
			if err != nil {
				return nil, err
			}
			tbl.Chains[ch.Name] = ch
		}
		for j := range lt.Sets {
			addFakeSet(tbl, &lt.Sets[j])
		}
		for _, name := range lt.Counters {
			tbl.Counters[name] = &knftables.FakeCounter{Counter: knftables.Counter{Family: fam, Table: lt.Name, Name: name}}
		}
		if fake.Tables[fam] == nil {
			fake.Tables[fam] = map[string]*knftables.FakeTable{}
		}
		fake.Tables[fam][lt.Name] = tbl
	}
	return fake, nil
}

func fakeChain(fam knftables.Family, table string, lc *nfttext.ListedChain) (*knftables.FakeChain, error) {
	ch := &knftables.FakeChain{Chain: knftables.Chain{Family: fam, Table: table, Name: lc.Name}}
	if lc.Comment != "" {
		ch.Comment = &lc.Comment
	}
	if lc.Hook != "" {
		// The listing writes "dstnat - 10"; ParsePriority reads "dstnat-10".
		prio := knftables.BaseChainPriority(strings.ReplaceAll(lc.Priority, " ", ""))
		if _, err := knftables.ParsePriority(fam, string(prio)); err != nil {
			return nil, fmt.Errorf("chain %s %s %s: priority %q: %w", fam, table, lc.Name, lc.Priority, err)
		}
		typ, hook := knftables.BaseChainType(lc.Type), knftables.BaseChainHook(lc.Hook)
		ch.Type, ch.Hook, ch.Priority = &typ, &hook, &prio
		if lc.Policy != "" {
			pol := knftables.BaseChainPolicy(lc.Policy)
			ch.Policy = &pol
		}
	}
	for _, r := range lc.Rules {
		ch.Rules = append(ch.Rules, &knftables.Rule{Family: fam, Table: table, Chain: lc.Name, Rule: r.Text})
	}
	return ch, nil
}

func addFakeSet(tbl *knftables.FakeTable, ls *nfttext.ListedSet) {
	fam, table := tbl.Family, tbl.Name
	elems := make([]*knftables.Element, 0, len(ls.Elements))
	for _, e := range ls.Elements {
		el := &knftables.Element{Family: fam, Table: table, Key: e.Key, Value: e.Value}
		if e.Comment != "" {
			el.Comment = &e.Comment
		}
		if ls.IsMap {
			el.Map = ls.Name
		} else {
			el.Set = ls.Name
		}
		elems = append(elems, el)
	}
	if ls.IsMap {
		tbl.Maps[ls.Name] = &knftables.FakeMap{Map: knftables.Map{Family: fam, Table: table, Name: ls.Name}, Elements: elems}
		return
	}
	tbl.Sets[ls.Name] = &knftables.FakeSet{Set: knftables.Set{Family: fam, Table: table, Name: ls.Name}, Elements: elems}
}
