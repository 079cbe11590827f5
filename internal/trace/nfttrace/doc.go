// Package nfttrace answers "where does this packet go?" (internal/trace) for an
// nftables ruleset held in a sigs.k8s.io/knftables Fake.
//
// It is a small interpreter of nft rule text, not a set of regexes tailored to one
// renderer: each rule is parsed by internal/nft/nfttext, the repository's one nft
// parser, and its syntax tree is evaluated against a described trace.Packet; this package
// only gives the parsed words their meaning (values.go) and runs the statements. The packet is walked through the base
// chains of every ip/ip6/inet table in the Fake, ordered by hook and priority the way
// the kernel orders them for the packet's path:
//
//   - arriving, to a non-local address:  prerouting -> forward -> postrouting
//   - arriving, to a local address:      prerouting -> input
//   - locally generated:                 output -> postrouting [-> prerouting(lo) -> input
//     if the final destination is local; nat chains are not re-run there because the
//     connection's NAT is already decided]
//
// The routing decision (forward vs input) is taken after prerouting, using the
// destination address after any DNAT. Addresses are "local" when listed in the
// tracer's local addresses or loopback.
//
// Semantics modelled, because kube-proxy-style rulesets depend on them:
//   - nat chains run only for packets whose conntrack state is "new", and within one
//     hook, once a NAT binding (dnat in prerouting/output, snat/masquerade in
//     postrouting/input) is made, later nat chains of that hook are skipped;
//   - dnat/snat/masquerade are terminal (they accept the packet for that base chain);
//   - accept ends the current base chain only; drop and reject end the trace;
//   - "numgen random" is explored exhaustively: every alternative is traced, and the
//     trace.Result holds one trace.Outcome per path (so DNATTargets lists all endpoints),
//     each with its Probability (1/N for each of the N alternatives of a choice);
//   - "update @set { ... }" is a no-op; set lookups see only the elements present in
//     the Fake, so affinity sets are empty unless the test pre-populates them;
//   - "ct status dnat" is true once a DNAT happened earlier in the same trace.
//
// FromListing loads the kernel's listing of a table (nfttext.ParseListing) into a
// Fake, so a node's live ruleset is traced by the same interpreter as a
// renderer's transactions (kube-proxy trace, internal/trace/live).
//
// Anything the interpreter does not understand is an error naming the rule (never
// silently ignored), so a renderer's tests fail loudly when it emits something new.
// Tracer.Validate parses every rule, set and map element up front for the same reason.
//
// Supported syntax (nfttext's grammar; both spelled forms are accepted where nft has
// two):
//
//	matches:    ip|ip6 saddr|daddr, ip protocol, ip6 nexthdr, meta l4proto, meta nfproto,
//	            tcp|udp|sctp|th dport|sport, [meta] mark [&|and|||or|^|xor N],
//	            [meta] iifname|oifname|iif|oif (with "veth*" wildcards),
//	            fib saddr|daddr type local|unicast|multicast|broadcast,
//	            ct state new|established|related|invalid|untracked (comma lists),
//	            ct status dnat|snat|...; operators ==, != (or implicit ==);
//	            right-hand sides: literals, prefixes, ranges a-b, anonymous sets { a, b },
//	            named sets @name; concatenations "a . b . c" looked up in sets and maps
//	            (interval elements with prefixes/ranges per component are honoured)
//	maps:       EXPR vmap @name | vmap { k : VERDICT, ... }; EXPR map @name | map { k : v }
//	            (in dnat/snat targets); numgen random mod N [offset M]
//	statements: accept, drop, reject [with icmp|icmpv6|icmpx type T | with tcp reset],
//	            jump C, goto C, return, continue,
//	            [meta] mark set EXPR (EXPR: number or "mark | N", "mark or N", "mark ^ N"...),
//	            dnat [ip|ip6] [addr . port] to ADDR[:PORT] | [V6]:PORT | ADDR . PORT | MAPEXPR,
//	            snat ... (same forms), masquerade [fully-random|random|persistent, ...],
//	            update|add @set { EXPR }, counter [name N | packets N bytes M],
//	            log [prefix S] [level L] [flags F] [group N], comment "..."
package nfttrace
