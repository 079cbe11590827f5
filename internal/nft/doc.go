// Package nft is kproxy's typed representation of nftables rules: the small
// vocabulary of statements the renderer (internal/render/nftables) emits, with
// exactly two back ends, a printer writing nft's text (this package) and an
// encoder writing netlink expressions (internal/nftnetlink, encode.go).
//
// # Contract
//
// The package is pure: no I/O, no logging, no global mutable state. Values are
// immutable once built; the renderer keeps them in Fragments and shares slices
// between rules, so nothing here modifies a slice it was given.
//
// The printer writes the text the renderer wrote before rules were typed, byte for
// byte (the renderer's expected-output files hold it), including its spellings:
// statements separated by one space, concatenations by " . ", anonymous set
// elements by ", ", anonymous map elements by " , " (a chain name in a verdict
// stands alone as a word),
// marks and masks in hexadecimal, a trailing ` comment "…"` quoted as Go does.
// internal/nft/nfttext reads the text back (TestTextReadsAsTypedRule in
// internal/nftnetlink checks every rule of the renderer's cases).
//
// # Vocabulary
//
//	Match        KEY [. KEY]* [!=] VALUE        VALUE: address, prefix, range,
//	                                            number, protocol, interface name,
//	                                            ct state or status, fib type,
//	                                            { set }, @set
//	MaskedMatch  mark and M [!=] V
//	VMap         KEY [. KEY]* vmap @map | vmap { K [. K]* : verdict , … }
//	MarkSet      mark set mark or|xor|and M | mark set M
//	Counter      counter | counter name "N"
//	Update       update|add @set { KEY [. KEY]* }
//	DNAT, SNAT   dnat|snat to ADDR[:PORT]
//	DNATMap      dnat ip|ip6 addr . port to KEY [. KEY]* map @map | map { N : ADDR . PORT , … }
//	Masquerade   masquerade [random] [fully-random] [persistent]
//	Reject       reject
//	Verdict      accept, drop, return, continue, jump C, goto C
//
// KEYs are ip|ip6 saddr|daddr, th dport|sport, tcp|udp|sctp dport, meta l4proto,
// mark, iifname, oifname, ct state, ct status, fib saddr|daddr type and numgen
// random mod N [offset O]. The renderer uses a subset; the rest is what
// internal/nft/nfttext lowers from knftables text, so that text and typed
// operations share one encoder.
// Stmt and Value are closed (unexported methods): a back end's type switch over
// them is complete.
//
// # Operations
//
// Op is one operation of a transaction on the table (add, flush or delete of the
// table, chains, sets and maps, counters; add of rules; add and delete of
// elements): a full sync is a stream of Ops and a partial sync a slice of them,
// which internal/nftnetlink encodes and Op.AppendText prints as knftables'
// transaction text (for the nft binary); internal/nft/nfttext reads that text back
// into Ops.
//
// Set and map types are SetType: datatypes (Key [: Data], nft's "type") or
// selectors (KeyOf [: DataOf], nft's "typeof"). Element keys and map values are
// Elem (element.go): a concatenation of fields (address, protocol, number,
// interface name) or a verdict, packed into one string of a tag byte and the
// field's bytes per field. An Elem is small and comparable (a State keeps ~10^5 of
// them, and keys them in maps); it prints as today's text ("10.96.0.12 . tcp . 80",
// "goto CHAIN"), and CompareText orders by that text. A number field does not say
// whether it is a port, a slot or a mark: the set's type does, in the encoder.
//
// Rules are built in bulk (about 10^5 at 10,000 Services), so statements are
// small values: addresses are netip values, numbers are integers, and a rule is a
// slice of statements and a comment, with no maps.
package nft
