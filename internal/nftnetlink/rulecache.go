package nftnetlink

import (
	"hash/maphash"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// maxCachedRules bounds the rule cache of one batch, and maxSeenRules the hashes
// of the rule texts met once.
const (
	maxCachedRules = 8192
	maxSeenRules   = 1 << 17
)

// A full sync at 10,000 Services repeats few distinct rules many times (a
// Service's rules name shared maps, not the Service: "dnat ... map
// @service-endpoints-tcp-3a"), and compiling them and marshalling their
// expressions was half of translating it. A rule's encoding depends only on the
// typed rule and on the sets of the batch, and a typed rule's printed text reads
// back as the same rule (nfttext, TestTextReadsAsTypedRule), so the translator
// keeps the encoding (everything after the chain attribute) of each rule without
// anonymous sets, for this batch only, keyed by its printed text: the text after
// "add rule <family> <table> <chain> " of a command line finds it (a line spelled
// otherwise than the printer spells it is read and encoded again).
//
// A rule is cached when its text comes a second time (ruleSeen): most rules of a
// full sync are met once (at 10,000 Services x 10 endpoints, 12,246 distinct texts
// among 27,968 rules, of which 548 repeat, 15,722 times), and caching every rule
// kept 8,192 encodings (2.3 MB, live while the batch is built, the sync's peak)
// that were never read, and left no room for the repeated rules of a larger
// table that come after the first 8,192.

// cachedRule writes line if it adds a rule whose text (after the chain name) was
// already translated in this batch, and reports whether it did.
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
	t.b.markCommand(t.at)
	t.writeCachedRule(chain, enc)
	return true
}

// writeCachedRule writes a rule of chain from its cached encoding.
func (t *translator) writeCachedRule(chain string, enc []byte) {
	b := t.b
	m := b.nftMsg(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, t.nfproto)
	b.attrString(unix.NFTA_RULE_TABLE, t.table)
	b.attrString(unix.NFTA_RULE_CHAIN, chain)
	b.buf = append(b.buf, enc...)
	b.endMsg(m)
}

// storeRule remembers enc as the encoding of the rule text if the text was met
// before in this batch.
func (t *translator) storeRule(text, enc []byte) {
	if len(t.rules) >= maxCachedRules || !t.ruleSeen(text) {
		return
	}
	if t.rules == nil {
		t.rules = make(map[string][]byte)
	}
	t.rules[string(text)] = slices.Clone(enc)
}

// ruleSeen reports whether the rule text was met before in this batch, and
// records that it was. (A hash collision only caches a rule at its first
// repetition instead of its second: the cache is keyed by the text.)
func (t *translator) ruleSeen(text []byte) bool {
	if t.seen == nil {
		t.seen, t.seenSeed = make(map[uint64]struct{}), maphash.MakeSeed()
	}
	h := maphash.Bytes(t.seenSeed, text)
	if _, ok := t.seen[h]; ok {
		return true
	}
	if len(t.seen) < maxSeenRules {
		t.seen[h] = struct{}{}
	}
	return false
}
