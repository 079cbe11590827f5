package nftnetlink

import (
	"bytes"

	"golang.org/x/sys/unix"
)

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
