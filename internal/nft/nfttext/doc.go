// Package nfttext is kproxy's one reader of nft text: a lexer and a parser of the
// nft syntax kproxy meets, shared by whatever reads it. Writers of nft text are
// elsewhere (internal/nft prints the renderer's typed rules); readers are the
// packet tracer (internal/trace/nfttrace, over the rules of a knftables Fake,
// or of a node's listing read by ParseListing) and the knftables front end of the netlink
// writer (internal/nftnetlink: Run, RunScript and Check read a transaction's
// text, lowered to internal/nft's typed operations).
//
// # Contract
//
// The package is pure: no I/O, no logging, no global mutable state. It parses;
// it does not interpret. The syntax tree keeps values as the words of the text (an
// address, a prefix, a range, a protocol or ct state name): what a word means is
// the reader's business (a tracer compares packets with it, a writer encodes it).
// Lower, the one exception, turns a parsed rule into internal/nft's typed rule
// (failing on syntax outside its vocabulary), so that text and typed operations
// reach the kernel through one encoder.
//
// # Grammar
//
// AppendTokens splits text into words: blanks separate them, "{", "}", ",", ";"
// are words of their own even when glued, ":" and "." only when they stand alone
// (they occur inside addresses), and a quoted string is one word, read as Go reads
// it (knftables writes %q).
//
// ParseRule reads one rule's statements and trailing comment:
//
//	matches:    SELECTOR [. SELECTOR]* [==|!=|eq|ne] RIGHT, RIGHT one of @set, a
//	            literal, a comma list "a,b", an anonymous set { a, b . c, … }
//	selectors:  ip|ip6 saddr|daddr, ip protocol, ip6 nexthdr, [meta] l4proto|mark|
//	            nfproto|iifname|oifname|iif|oif, tcp|udp|sctp|th dport|sport,
//	            fib saddr|daddr [. iif|oif] type, ct state|status,
//	            numgen random mod N [offset M]; mark and numgen take bitwise
//	            operations "and|&|or|||xor|^ N"
//	maps:       KEY vmap @map | vmap { k : VERDICT, … }; in nat: KEY map @map |
//	            map { k : a . p, … }
//	statements: accept, drop, continue, return, jump C, goto C,
//	            reject [with icmp|icmpv6|icmpx [type|code] T | with tcp reset],
//	            counter [name N | packets P bytes B], log [prefix|level|flags|…],
//	            [meta] mark set (N | mark OP N), masquerade [FLAGS],
//	            dnat|snat [ip|ip6] [addr . port] to (TARGET | KEY map MAP) [FLAGS],
//	            add|update @set { KEY [timeout T] }, comment "…" (last)
//
// CommandParser reads one command of a knftables transaction (its String(): one
// per line, as knftables writes them) into internal/nft's typed operation: add,
// create, delete and flush of the table, chains, sets, maps and counters, add
// rule (lowered) and add, create and delete of elements. Set types read into
// nft.SetType ("type" datatypes, or "typeof" selectors lowered to nft.Key), and
// element keys and values into nft.Elem (element.go): each field of a
// concatenation is an address, a number, a protocol name or an interface name
// (a quoted word, or any other word), a map value that starts with a verdict
// keyword a verdict. ParseElem reads one key or value the same way.
//
// ParseListing reads the structure of what `nft list table` prints (listing.go):
// tables, chains with their hook, priority ("dstnat - 10"), policy and comment,
// sets and maps with their type, flags and elements (wrapped over lines, each with
// its own comment, timeout and expiry), named counters; each rule line goes
// through ParseRule's parser, so the kernel's spelling of a rule ("meta mark &
// 0x00004000 != 0x00000000", "dnat ip to … map @m") and a transaction's are one
// syntax tree.
//
// Anything else is an error naming the word it stopped at: a reader fails loudly
// on syntax it does not know, never reads something else.
package nfttext
