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
//	err = ex.RunScript(ctx, texts)             // tx.String() texts in pieces, one batch
//	err = ex.RunOps(ctx, ops)                  // typed operations (internal/nft), one batch
//
// Drift detection reads the table back (inventory.go, inventory_kernel.go,
// canon.go): InventoryOf(ops) encodes a stream of operations as RunOps would,
// without a socket, and ReadInventory dumps the kernel's table; both reduce every
// chain, rule, set definition and element to a canonical form of its netlink
// attributes (the normalisations a kernel dump needs are listed in canon.go) and
// keep its 64-bit hash, and CompareInventories lists the differences
// (internal/drift). TableExists (one request) and Generation (the namespace's
// ruleset generation) are the cheap checks around it; CountElements counts a set's
// elements from one dump without decoding them (kproxy-bench's poll of a sync).
//
// Executor implements knftables.Interface. ListAll lists the table's chain, set,
// map and counter names itself, by netlink dumps that never read set elements; the other List*
// methods are delegated to Options.Lister (typically the nft-binary
// knftables.Interface) and fail without it.
//
// # How a transaction is read
//
// knftables does not export a Transaction's operations. Its one supported view of
// them is tx.String(): the nft commands it would pipe to nft, one per line, in a
// fixed format (objects.go writeOperation). The executor reads exactly that text —
// the same contract knftables has with nft — instead of reaching into unexported
// fields with reflection/unsafe, which would break silently when knftables
// changes. A pending transaction error (knftables prints it as a trailing
// "# ERROR:" line) is returned as is.
//
// This package has no parser of its own: each line is read by
// internal/nft/nfttext (CommandParser, the repository's one nft parser) into the
// typed operation (internal/nft Op, its rule lowered to nft.Rule) that RunOps
// writes, and goes through the same encoders (op, ops.go). Text and typed
// operations therefore send the same batch by construction; what the text may
// say is what the typed operations can say.
//
// # Supported syntax
//
// Commands: add/create/delete/flush table; add/create/delete/flush chain (base
// chains: type, hook, priority, policy, comment); add rule (no index/handle);
// add/create/delete/flush set and map (type with concatenations, flags constant,
// dynamic, interval, timeout; timeout (with flags dynamic,timeout), gc-interval,
// size, policy, auto-merge, comment; "typeof" of concatenations of ip|ip6
// saddr|daddr, th sport|dport, tcp|udp|sctp dport, meta l4proto and numgen, with
// the userdata nft writes for it, see typeof.go); add/create/delete element
// (concatenated keys, comment, verdict or data values); add/create/delete counter
// (named counters, optionally with `{ packets N bytes M ; }`; adding an existing
// one keeps its value, as with nft). Not supported (error): typeof of one
// expression, handles/index/insert/replace, elements of named interval sets (nft
// merges them with the set's current content), inet/arp/bridge/netdev tables,
// flowtables, other stateful objects (quotas, limits, ...).
//
// Rule statements, internal/nft's vocabulary (see its doc.go): payload matches
// `ip|ip6 saddr|daddr [!=] addr|prefix|range|{ addrs, prefixes, ranges }|@set`,
// `th dport|sport`, `meta l4proto`, concatenations of those with `. ` followed by
// `@set`, `vmap @map` or `vmap { … }`; `ct state|status [!=] a,b`; `mark [!=] V`,
// `mark and X [!=] Y`; `mark set X` and `[meta] mark set [meta] mark or|xor|and||
// X`; `fib saddr|daddr type [!=] T`; `iifname|oifname [!=] name|prefix*`; `numgen
// random mod N [offset O] [V]` as a match, with `vmap { … }` or as the dnat map
// key; `update|add @set { key }`; `counter`; `counter name "N"`; `dnat|snat [ip|ip6]
// to addr[:port]`, `dnat ip|ip6 addr . port to numgen random mod N map { … }` and
// `dnat ip|ip6 addr . port to KEY map @map` (KEY a selector or a concatenation,
// where `tcp|udp|sctp dport` adds nft's `meta l4proto` dependency first);
// `masquerade [random] [fully-random] [persistent]`; `reject`; verdicts accept,
// drop, return, continue, jump X, goto X; a trailing `comment "…"`. Anything else
// (nfttext parses more, for the tracer) makes Run fail with an error naming the
// command; nothing is sent.
//
// The expressions are those nft 1.0.6 generates for the same text (checked with
// `nft --debug=netlink`), so `nft list table` prints both rulesets identically
// (see equivalence_test.go).
//
// # Typed operations
//
// encodeRule (encode.go) compiles a typed rule of internal/nft, the renderer's
// representation, into expressions, anonymous sets and comment: it only turns keys
// and values into selectors, bytes and verdicts and calls one set of emitters
// (emit.go), which write what nft generates for each statement; writeRule
// (script.go) sends the result.
//
// RunOps (ops.go) writes a stream of typed operations, a full sync
// (render/nftables.FullOps) or a partial one (render/nftables.Plan.Ops); the
// daemon writes every sync this way, and Run, RunScript and Check serve knftables
// callers and the tests. Rules go through encodeRule, and the table, chains, sets,
// elements and counters through newTable, newChain, newSet, element and
// newCounter. Set types (nft.SetType) become key and data types and typeof
// userdata (types.go keyTypeOf, typeof.go typeofSpec), and elements (nft.Elem)
// are encoded field by field against the set's type (types.go appendKey): no nft
// word is parsed on this path. The rule cache is keyed by the rule's printed text
// (rulecache.go); the failing operation of a refused batch is quoted as its text.
// TestTextReadsAsTypedRule checks that every rule of every renderer case reads
// back from its text as the typed rule, TestBuildOpsIsBuildScript and
// TestBuildOpsIsBuildTextForDeltas that operations and their text send the same
// batch, and testdata/<case>.netlink pins the batch of every case (dumpBatch;
// rewrite with `go test -run TestBuildGolden -update`).
//
// # Atomicity and errors
//
// All commands of one transaction go into one nfnetlink batch; the kernel applies
// all or nothing. Like nft, the batch requests no per-message acks; the kernel
// processes it synchronously inside sendmsg and queues one error per failed
// message, which Run reports with the failing command's text. Consecutive element
// commands on one set share a message, so an error names the first of them.
//
// Element commands of a transaction that does not define the set ask the kernel for
// the set's type (one NFT_MSG_GETSET per set, on the Run's socket).
//
// # Socket failures
//
// Every Run, listing and inventory read opens its own socket and closes it when
// done, so a socket that failed never serves the retry. All its system calls go
// through Conn (sock.go), which Options.WrapConn may wrap: the tests make calls
// fail with the kernel's errnos on a real socket (internal/nftnetlink/nlfault,
// TestSocketFaults). EINTR is retried. A failure before the batch's sendmsg
// succeeded (sendmsg's ENOBUFS, ENOMEM, EAGAIN, EBADF, or the set type lookup's)
// means the kernel never saw the batch: Run returns the error, wrapped with %w,
// and the table is unchanged. Every such failure of a system call is a
// *SocketError (IsSocketError), which the kernel's refusal of a batch never is:
// the dataplane replaces its table only when the kernel refused a refresh. ENOBUFS reading the batch's replies means error
// replies were dropped (a committed batch queues none): the batch failed. Any
// other failure reading them leaves the outcome unknown (the kernel took the
// batch and may have committed it), and the error says so: a caller must not
// assume either table, and the dataplane's retry rewrites the whole table.
package nftnetlink
