package nftnetlink

import (
	"bytes"
	"strings"

	"golang.org/x/sys/unix"
)

// anonSetOf builds an anonymous set of values, prefixes or ranges.
func (rc *ruleCompiler) anonSetOf(t dataType, items []string) (*anonSet, error) {
	a := &anonSet{id: rc.nextID(), key: keyType{fields: []dataType{t}}}
	var ivs []interval
	for _, it := range items {
		if (t.name == "ipv4_addr" || t.name == "ipv6_addr") && strings.ContainsAny(it, "/-") {
			a.interval = true
		}
		iv, err := parseInterval(t, it)
		if err != nil {
			return nil, err
		}
		ivs = append(ivs, iv)
	}
	if !a.interval {
		for _, iv := range ivs {
			a.elems = append(a.elems, anonElem{key: iv.first})
		}
	} else {
		a.elems = intervalElements(ivs)
	}
	rc.out.anon = append(rc.out.anon, a)
	return a, nil
}

// intervalElements encodes ranges the way nft does for an interval set: sorted,
// merged when they overlap or touch, each as a start element and an end element
// (the first address after the range, flagged INTERVAL_END), with a leading end
// element at zero when the first range does not start there.
func intervalElements(ivs []interval) []anonElem {
	sortIntervals(ivs)
	var merged []interval
	for _, iv := range ivs {
		if n := len(merged); n > 0 {
			lastNext := increment(merged[n-1].last)
			if lastNext == nil || bytes.Compare(iv.first, lastNext) <= 0 {
				if bytes.Compare(iv.last, merged[n-1].last) > 0 {
					merged[n-1].last = iv.last
				}
				continue
			}
		}
		merged = append(merged, iv)
	}
	var out []anonElem
	if len(merged) > 0 && !allZero(merged[0].first) {
		out = append(out, anonElem{key: make([]byte, len(merged[0].first)), flags: unix.NFT_SET_ELEM_INTERVAL_END})
	}
	for _, iv := range merged {
		if end := increment(iv.last); end != nil {
			out = append(out, anonElem{key: iv.first}, anonElem{key: end, flags: unix.NFT_SET_ELEM_INTERVAL_END})
		} else {
			// Open-ended (up to the last address): nft marks it in the userdata.
			out = append(out, anonElem{key: iv.first, open: true})
		}
	}
	return out
}

func sortIntervals(ivs []interval) {
	for i := 1; i < len(ivs); i++ {
		for j := i; j > 0 && bytes.Compare(ivs[j].first, ivs[j-1].first) < 0; j-- {
			ivs[j], ivs[j-1] = ivs[j-1], ivs[j]
		}
	}
}

// increment returns b+1 as a big-endian number, or nil on overflow.
func increment(b []byte) []byte {
	out := append([]byte(nil), b...)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			return out
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// anonMap parses "{ k : verdict , … }" (data nil) or "{ k : a . p , … }".
func (rc *ruleCompiler) anonMap(key keyType, data *keyType) (*anonSet, error) {
	c := &rc.c
	if err := c.expect("{"); err != nil {
		return nil, err
	}
	a := &anonSet{id: rc.nextID(), key: key}
	if data == nil {
		a.data = &keyType{fields: []dataType{dataTypes["verdict"]}}
	} else {
		a.data = data
	}
	for {
		var kparts []string
		for {
			kparts = append(kparts, c.next())
			if !c.accept(".") {
				break
			}
		}
		k, err := encodeKey(key, kparts)
		if err != nil {
			return nil, err
		}
		if err := c.expect(":"); err != nil {
			return nil, err
		}
		e := anonElem{key: k}
		if data == nil {
			if e.verdict, err = parseVerdict(c); err != nil {
				return nil, err
			}
		} else {
			var dparts []string
			for {
				dparts = append(dparts, c.next())
				if !c.accept(".") {
					break
				}
			}
			if e.data, err = encodeKey(*data, dparts); err != nil {
				return nil, err
			}
		}
		a.elems = append(a.elems, e)
		if c.accept("}") {
			break
		}
		if err := c.expect(","); err != nil {
			return nil, err
		}
	}
	rc.out.anon = append(rc.out.anon, a)
	return a, nil
}
