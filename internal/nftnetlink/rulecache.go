package nftnetlink

import (
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// maxCachedRules bounds the rule cache of one batch.
const maxCachedRules = 8192

// cachedRule writes line if it adds a rule whose text (after the chain name) was
// already translated in this batch, and reports whether it did. A full sync at
// 10,000 Services repeats few distinct rule texts many times (a Service's rules
// name shared maps, not the Service: "dnat ... map @service-endpoints-tcp-3a"),
// and parsing them and marshalling their expressions was half of translating it.
// A rule's encoding depends only on its text and on the sets of the batch, so it
// is reused within the batch only.
func (t *translator) cachedRule(line string) bool {
	rest, ok := strings.CutPrefix(line, t.rulePrefix)
	if !ok || len(t.rules) == 0 || strings.HasPrefix(rest, "\"") {
		return false
	}
	chain, text, ok := strings.Cut(rest, " ")
	if !ok {
		return false
	}
	enc, ok := t.rules[text]
	if !ok {
		return false
	}
	t.flushElems()
	b := t.b
	b.markCommand(t.at)
	m := b.nftMsg(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, t.nfproto)
	b.attrString(unix.NFTA_RULE_TABLE, t.table)
	b.attrString(unix.NFTA_RULE_CHAIN, chain)
	b.buf = append(b.buf, enc...)
	b.endMsg(m)
	return true
}

// cacheRule remembers the encoding of the rule text of line (see cachedRule).
func (t *translator) cacheRule(line string, enc []byte) {
	rest, ok := strings.CutPrefix(line, t.rulePrefix)
	if !ok || len(t.rules) >= maxCachedRules || strings.HasPrefix(rest, "\"") {
		return
	}
	if _, text, ok := strings.Cut(rest, " "); ok {
		if t.rules == nil {
			t.rules = make(map[string][]byte)
		}
		t.rules[strings.Clone(text)] = slices.Clone(enc)
	}
}
