package nfttrace

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
	"github.com/kproxy/kproxy/internal/trace"
)

// evalSelector computes a selector's value for the packet. ok is false when the
// selector does not apply (e.g. "ip saddr" of an IPv6 packet, "tcp dport" of a UDP
// packet, "iif" of a locally generated packet): nft then fails the whole match,
// whatever the operator.
func (r *run) evalSelector(c nfttext.Selector) (value, bool, error) {
	p := &r.pkt
	v := value{kind: kinds[c.Type]}
	switch c.Name {
	case "ip saddr", "ip daddr", "ip6 saddr", "ip6 daddr":
		if p.v6 != strings.HasPrefix(c.Name, "ip6") {
			return v, false, nil
		}
		v.addr = p.src
		if strings.HasSuffix(c.Name, "daddr") {
			v.addr = p.dst
		}
	case "ip protocol", "ip6 nexthdr":
		if p.v6 != (c.Name == "ip6 nexthdr") {
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
		if p.iif == "" && c.Name == "meta iif" {
			return v, false, nil
		}
		v.str = p.iif
	case "meta oifname", "meta oif":
		if p.oif == "" && c.Name == "meta oif" {
			return v, false, nil
		}
		v.str = p.oif
	case "tcp dport", "tcp sport", "udp dport", "udp sport", "sctp dport", "sctp sport", "th dport", "th sport":
		proto, field, _ := strings.Cut(c.Name, " ")
		if proto == "th" {
			if !p.hasPorts() {
				return v, false, nil
			}
		} else if n, _ := trace.ProtocolNumber(proto); uint64(n) != p.proto {
			return v, false, nil
		}
		v.num = p.dport
		if field == "sport" {
			v.num = p.sport
		}
	case "fib saddr type", "fib daddr type":
		a := p.dst
		if c.Name == "fib saddr type" {
			a = p.src
		}
		v.str = r.addrType(a)
	case "ct state":
		v.str = p.ctState
	case "ct status":
		v.flags = p.ctStatus
	case "numgen random":
		choice := uint64(r.choose(int(c.Mod)))
		v.num = choice + uint64(c.Offset)
		r.pending = append(r.pending, fmt.Sprintf("    numgen random mod %d: chose %d", c.Mod, choice))
	default:
		return v, false, fmt.Errorf("internal error: unknown selector %q", c.Name)
	}
	for _, b := range c.Ops {
		switch b.Op {
		case '&':
			v.num &= uint64(b.Value)
		case '|':
			v.num |= uint64(b.Value)
		case '^':
			v.num ^= uint64(b.Value)
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

// evalExpr evaluates every selector of e; ok is false if any does not apply.
func (r *run) evalExpr(e nfttext.Expr) ([]value, bool, error) {
	vals := make([]value, len(e))
	for i, c := range e {
		v, ok, err := r.evalSelector(c)
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

// anyKeyMatches reports whether one of keys (words, one per part of key) matches
// vals.
func anyKeyMatches(key nfttext.Expr, keys [][]string, vals []value) (bool, error) {
	ks, err := exprKinds(key)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		ps, err := parseKey(ks, k)
		if err != nil {
			return false, err
		}
		if keyMatches(ps, vals) {
			return true, nil
		}
	}
	return false, nil
}

func (r *run) evalMatch(tbl tableRef, m nfttext.Match) (bool, error) {
	vals, ok, err := r.evalExpr(m.Left)
	if err != nil || !ok {
		return false, err
	}
	keys := m.Elems
	if m.Set != "" {
		if keys, err = setKeys(tbl, m.Set, m.Left); err != nil {
			return false, err
		}
	}
	found, err := anyKeyMatches(m.Left, keys, vals)
	if err != nil {
		return false, err
	}
	return found != m.Neq, nil
}

// setKeys returns the keys of the elements of a named set, checked to parse as
// keys of the lookup expression's types.
func setKeys(tbl tableRef, name string, key nfttext.Expr) ([][]string, error) {
	set := tbl.t.Sets[name]
	if set == nil {
		if tbl.t.Maps[name] != nil {
			return nil, fmt.Errorf("@%s is a map, not a set", name)
		}
		return nil, fmt.Errorf("no such set @%s in table %s %s", name, tbl.family, tbl.name)
	}
	ks, err := exprKinds(key)
	if err != nil {
		return nil, err
	}
	keys := make([][]string, 0, len(set.Elements))
	for _, el := range set.Elements {
		if _, err := parseKey(ks, el.Key); err != nil {
			return nil, fmt.Errorf("set @%s element %q: %w", name, strings.Join(el.Key, " . "), err)
		}
		keys = append(keys, el.Key)
	}
	return keys, nil
}

// parseKey parses the words of a key as patterns of the lookup's kinds.
func parseKey(kinds []kind, key []string) ([]pattern, error) {
	if len(key) != len(kinds) {
		return nil, fmt.Errorf("key has %d components, lookup has %d", len(key), len(kinds))
	}
	ps := make([]pattern, len(kinds))
	for i, k := range kinds {
		var err error
		if ps[i], err = parseLiteral(k, key[i]); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// mapEntries returns the elements of an anonymous or named map of a lookup, the
// values of a verdict map (verdict) read as verdicts.
func mapEntries(tbl tableRef, m *nfttext.MapRef, verdict bool) ([]nfttext.MapElem, error) {
	ks, err := exprKinds(m.Key)
	if err != nil {
		return nil, err
	}
	if m.Name == "" {
		for _, e := range m.Elems {
			if _, err := parseKey(ks, e.Key); err != nil {
				return nil, fmt.Errorf("map element %q: %w", e.Text, err)
			}
		}
		return m.Elems, nil
	}
	mp := tbl.t.Maps[m.Name]
	if mp == nil {
		if tbl.t.Sets[m.Name] != nil {
			return nil, fmt.Errorf("@%s is a set, not a map", m.Name)
		}
		return nil, fmt.Errorf("no such map @%s in table %s %s", m.Name, tbl.family, tbl.name)
	}
	entries := make([]nfttext.MapElem, 0, len(mp.Elements))
	for _, el := range mp.Elements {
		value := strings.Join(el.Value, " . ")
		e := nfttext.MapElem{Key: el.Key, Text: fmt.Sprintf("@%s element { %s : %s }", m.Name, strings.Join(el.Key, " . "), value)}
		if _, err := parseKey(ks, el.Key); err != nil {
			return nil, fmt.Errorf("map @%s element %q: %w", m.Name, e.Text, err)
		}
		if verdict {
			v, err := nfttext.ParseVerdict(value)
			if err != nil {
				return nil, fmt.Errorf("map @%s element %q: %w", m.Name, e.Text, err)
			}
			e.Verdict = &v
		} else if e.Data, err = nfttext.ParseData(value); err != nil {
			return nil, fmt.Errorf("map @%s element %q: %w", m.Name, e.Text, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// lookupMap evaluates the key and returns the matching element, or nil if none.
func (r *run) lookupMap(tbl tableRef, m *nfttext.MapRef, verdict bool) (*nfttext.MapElem, error) {
	entries, err := mapEntries(tbl, m, verdict)
	if err != nil {
		return nil, err
	}
	vals, ok, err := r.evalExpr(m.Key)
	if err != nil || !ok {
		return nil, err
	}
	ks, err := exprKinds(m.Key)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		ps, err := parseKey(ks, entries[i].Key)
		if err != nil {
			return nil, err
		}
		if keyMatches(ps, vals) {
			return &entries[i], nil
		}
	}
	return nil, nil
}
