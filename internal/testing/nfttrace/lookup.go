package nfttrace

import (
	"fmt"
	"net/netip"
	"strings"
)

// evalComponent computes a selector's value for the packet. ok is false when the
// selector does not apply (e.g. "ip saddr" of an IPv6 packet, "tcp dport" of a UDP
// packet, "iif" of a locally generated packet): nft then fails the whole match,
// whatever the operator.
func (r *run) evalComponent(c component) (value, bool, error) {
	p := &r.pkt
	v := value{kind: c.kind}
	switch c.sel {
	case "ip saddr", "ip daddr", "ip6 saddr", "ip6 daddr":
		if p.v6 != strings.HasPrefix(c.sel, "ip6") {
			return v, false, nil
		}
		v.addr = p.src
		if strings.HasSuffix(c.sel, "daddr") {
			v.addr = p.dst
		}
	case "ip protocol", "ip6 nexthdr":
		if p.v6 != (c.sel == "ip6 nexthdr") {
			return v, false, nil
		}
		v.num = p.proto
	case "meta l4proto":
		v.num = p.proto
	case "meta nfproto":
		v.str = "ipv4"
		if p.v6 {
			v.str = "ipv6"
		}
	case "meta mark":
		v.num = uint64(p.mark)
	case "meta iifname", "meta iif":
		if p.iif == "" && c.sel == "meta iif" {
			return v, false, nil
		}
		v.str = p.iif
	case "meta oifname", "meta oif":
		if p.oif == "" && c.sel == "meta oif" {
			return v, false, nil
		}
		v.str = p.oif
	case "tcp dport", "tcp sport", "udp dport", "udp sport", "sctp dport", "sctp sport", "th dport", "th sport":
		proto, field, _ := strings.Cut(c.sel, " ")
		if proto == "th" {
			if !p.hasPorts() {
				return v, false, nil
			}
		} else if protoNumbers[proto] != p.proto {
			return v, false, nil
		}
		v.num = p.dport
		if field == "sport" {
			v.num = p.sport
		}
	case "fib saddr type", "fib daddr type":
		a := p.dst
		if c.sel == "fib saddr type" {
			a = p.src
		}
		v.str = r.addrType(a)
	case "ct state":
		v.str = p.ctState
	case "ct status":
		v.flags = p.ctStatus
	case "numgen":
		v.num = uint64(r.choose(int(c.mod))) + c.offset
		r.pending = append(r.pending, fmt.Sprintf("    numgen random mod %d: chose %d", c.mod, v.num-c.offset))
	default:
		return v, false, fmt.Errorf("internal error: unknown selector %q", c.sel)
	}
	for _, b := range c.bitops {
		switch b.op {
		case '&':
			v.num &= b.val
		case '|':
			v.num |= b.val
		case '^':
			v.num ^= b.val
		}
	}
	return v, true, nil
}

func (r *run) addrType(a netip.Addr) string {
	switch {
	case r.tr.isLocal(a):
		return "local"
	case a.IsMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	return "unicast"
}

// evalExpr evaluates every part of e; ok is false if any part does not apply.
func (r *run) evalExpr(e expr) ([]value, bool, error) {
	vals := make([]value, len(e.parts))
	for i, c := range e.parts {
		v, ok, err := r.evalComponent(c)
		if err != nil || !ok {
			return nil, false, err
		}
		vals[i] = v
	}
	return vals, true, nil
}

func keyMatches(key []pattern, vals []value) bool {
	for i, p := range key {
		if !p.matches(vals[i]) {
			return false
		}
	}
	return true
}

func (r *run) evalMatch(tbl tableRef, m matchStmt) (bool, error) {
	vals, ok, err := r.evalExpr(m.lhs)
	if err != nil || !ok {
		return false, err
	}
	found := false
	if m.setName != "" {
		keys, err := setKeys(tbl, m.setName, m.lhs)
		if err != nil {
			return false, err
		}
		for _, k := range keys {
			if keyMatches(k, vals) {
				found = true
				break
			}
		}
	} else {
		for _, k := range m.anon {
			if keyMatches(k, vals) {
				found = true
				break
			}
		}
	}
	return found != m.negate, nil
}

// setKeys parses the elements of a named set as keys of the lookup expression's types.
func setKeys(tbl tableRef, name string, key expr) ([][]pattern, error) {
	set := tbl.t.Sets[name]
	if set == nil {
		if tbl.t.Maps[name] != nil {
			return nil, fmt.Errorf("@%s is a map, not a set", name)
		}
		return nil, fmt.Errorf("no such set @%s in table %s %s", name, tbl.family, tbl.name)
	}
	kinds := key.kinds()
	var keys [][]pattern
	for _, el := range set.Elements {
		k, err := parseKeyStrings(kinds, el.Key)
		if err != nil {
			return nil, fmt.Errorf("set @%s element %q: %w", name, strings.Join(el.Key, " . "), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func parseKeyStrings(kinds []kind, key []string) ([]pattern, error) {
	if len(key) != len(kinds) {
		return nil, fmt.Errorf("key has %d components, lookup has %d", len(key), len(kinds))
	}
	ps := make([]pattern, len(kinds))
	for i, k := range kinds {
		var err error
		if ps[i], err = parseLiteral(k, token(key[i])); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// mapEntries returns the entries of an anonymous or named map for a lookup.
func mapEntries(tbl tableRef, m mapLookup) ([]mapEntry, error) {
	if m.name == "" {
		return m.anon, nil
	}
	mp := tbl.t.Maps[m.name]
	if mp == nil {
		if tbl.t.Sets[m.name] != nil {
			return nil, fmt.Errorf("@%s is a set, not a map", m.name)
		}
		return nil, fmt.Errorf("no such map @%s in table %s %s", m.name, tbl.family, tbl.name)
	}
	kinds := m.key.kinds()
	var entries []mapEntry
	for _, el := range mp.Elements {
		text := fmt.Sprintf("@%s element { %s : %s }", m.name, strings.Join(el.Key, " . "), strings.Join(el.Value, " . "))
		k, err := parseKeyStrings(kinds, el.Key)
		if err != nil {
			return nil, fmt.Errorf("map @%s element %q: %w", m.name, text, err)
		}
		toks, err := tokenize(strings.Join(el.Value, " . "))
		if err != nil {
			return nil, fmt.Errorf("map @%s element %q: %w", m.name, text, err)
		}
		vals := make([]string, len(toks))
		for i, t := range toks {
			vals[i] = string(t)
		}
		e, err := makeMapEntry(k, vals, m.verdict)
		if err != nil {
			return nil, fmt.Errorf("map @%s element %q: %w", m.name, text, err)
		}
		e.text = text
		entries = append(entries, e)
	}
	return entries, nil
}

// lookupMap evaluates the key and returns the matching entry, or nil if none.
func (r *run) lookupMap(tbl tableRef, m mapLookup) (*mapEntry, error) {
	entries, err := mapEntries(tbl, m)
	if err != nil {
		return nil, err
	}
	vals, ok, err := r.evalExpr(m.key)
	if err != nil || !ok {
		return nil, err
	}
	for i := range entries {
		if keyMatches(entries[i].key, vals) {
			return &entries[i], nil
		}
	}
	return nil, nil
}

func checkSetRef(tbl tableRef, name string, key expr) error {
	_, err := setKeys(tbl, name, key)
	return err
}

// validateRuleRefs checks that the sets and maps a rule uses exist and that their
// elements parse as the rule's lookup types.
func validateRuleRefs(tbl tableRef, chain string, pr *parsedRule) error {
	for _, st := range pr.stmts {
		var err error
		switch st := st.(type) {
		case matchStmt:
			if st.setName != "" {
				err = checkSetRef(tbl, st.setName, st.lhs)
			}
		case updateStmt:
			err = checkSetRef(tbl, st.set, st.key)
		case verdictStmt:
			err = checkChainRef(tbl, st)
		case vmapStmt:
			var entries []mapEntry
			entries, err = mapEntries(tbl, st.lookup)
			for _, e := range entries {
				if err == nil {
					err = checkChainRef(tbl, *e.verdict)
				}
			}
		case natStmt:
			if st.lookup != nil {
				var entries []mapEntry
				entries, err = mapEntries(tbl, *st.lookup)
				for _, e := range entries {
					if err == nil {
						_, err = parseNATTarget(e.data, st.family)
					}
				}
			}
		}
		if err != nil {
			return newRuleError(tbl, chain, pr.text, err)
		}
	}
	return nil
}

func checkChainRef(tbl tableRef, v verdictStmt) error {
	if v.chain != "" && tbl.t.Chains[v.chain] == nil {
		return fmt.Errorf("%s to unknown chain %q", v.verdict, v.chain)
	}
	return nil
}
