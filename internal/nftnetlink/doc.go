// Package nftnetlink executes sigs.k8s.io/knftables transactions over netlink
// instead of piping their text to `nft -f -`: the nft binary parses the text (slow
// for large transactions) and loads the table's existing state before applying
// even a one-rule change (tens of milliseconds on a 10k-Service table); writing the
// same objects and expressions directly as one nfnetlink batch avoids both.
//
// # API
//
//	ex, err := New(family, table, Options{})   // no side effects
//	tx := ex.NewTransaction()                  // a *knftables.Transaction, filled as usual
//	err = ex.Run(ctx, tx)                      // one atomic netlink batch
//	err = ex.Check(ctx, tx)                    // same batch, validated then aborted
//
// Executor implements knftables.Interface; the List* methods are delegated to
// Options.Lister (typically the nft-binary knftables.Interface) and fail without it.
//
// # How a transaction is read
//
// knftables does not export a Transaction's operations. Its one supported view of
// them is tx.String(): the nft commands it would pipe to nft, one per line, in a
// fixed format (objects.go writeOperation). The executor parses exactly that text
// (script.go) — the same contract knftables has with nft — instead of reaching into
// unexported fields with reflection/unsafe, which would break silently when
// knftables changes. A pending transaction error (knftables prints it as a trailing
// "# ERROR:" line) is returned as is.
//
// # Supported syntax
//
// Commands: add/create/delete/flush table; add/create/delete/flush chain (base
// chains: type, hook, priority, policy, comment); add rule (no index/handle);
// add/create/delete/flush set and map (type with concatenations, flags constant,
// dynamic, interval, timeout; timeout, size, policy, comment); add/create/delete
// element (concatenated keys, comment, verdict or data values, prefixes and ranges
// in interval sets).
//
// Rule statements (rule.go): payload matches `ip|ip6 saddr|daddr [!=] addr|prefix|
// { prefixes }|@set`, `th dport`, `meta l4proto`, concatenations of those with
// `. ` followed by `@set` or `vmap @map`; `ct state|status [!=] a,b`; `mark and X
// [!=] Y`; `meta mark|mark set mark or|xor|and|| X`; `fib saddr|daddr type T`;
// `iifname|oifname [!=] name|prefix*`; `numgen random mod N [offset O] [V]` as a
// match, with `vmap { … }` or as the dnat map key; `update @set { key }`; `counter`;
// `dnat [ip|ip6] to addr[:port]` and `dnat ip|ip6 addr . port to numgen random mod N
// map { … }`; `masquerade [random|fully-random|persistent]`; `reject`; verdicts
// accept, drop, return, continue, jump X, goto X; a trailing `comment "…"`.
// Anything else makes Run fail with an error naming the command; nothing is sent.
//
// The expressions are those nft 1.0.6 generates for the same text (checked with
// `nft --debug=netlink`), so `nft list table` prints both rulesets identically
// (see equivalence_test.go).
//
// # Atomicity and errors
//
// All commands of one transaction go into one nfnetlink batch; the kernel applies
// all or nothing. Like nft, the batch requests no per-message acks; the kernel
// processes it synchronously inside sendmsg and queues one error per failed
// message, which Run reports with the failing command's text.
package nftnetlink
