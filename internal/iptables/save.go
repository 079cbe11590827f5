package iptables

import (
	"bufio"
	"bytes"
)

// ChainsInSave returns the names of the chains declared in iptables-save output
// (":NAME POLICY [p:b]" lines), in order. It is the one reader of that format in
// kproxy: the iptables proxier passes the nat table's chains to the renderer's
// WriteFull, which deletes the per-ServicePort chains no Service renders, and
// --cleanup deletes those of every proxier.
func ChainsInSave(data []byte) []Chain {
	var out []Chain
	sc := bufio.NewScanner(bytes.NewReader(data))
	// A rule line of a large table can be long (comments, many matches).
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 || line[0] != ':' {
			continue
		}
		if name, _, _ := bytes.Cut(line[1:], []byte(" ")); len(name) > 0 {
			out = append(out, Chain(name))
		}
	}
	return out
}
