// Package ipttrace answers "where does this packet go?" (internal/trace) for one
// family's iptables rules as iptables-save lists them: the iptables sibling of
// nfttrace, for kproxy's and upstream kube-proxy's iptables mode and `kube-proxy
// trace`.
//
//	New(save, v6, localAddresses) (*Tracer, error)   parse every table, every rule
//	(*Tracer).Trace(packet) (*trace.Result, error)   every path of the packet
//	(*Tracer).WithRecent(name, addrs...) *Tracer     a copy with a -m recent list filled
//	(*Tracer).WithSets(sets) (*Tracer, error)        a copy with the ipsets -m set matches
//	(*Tracer).WithBridged(names...) *Tracer          bridges whose packets -m physdev sees
//	(*Tracer).WithBalancer(b) *Tracer                IPVS between the tables (ipvstrace)
//
// The save is read by internal/iptables.ParseSave, kproxy's one reader of the
// format; this package gives the arguments their meaning. Every rule is parsed by
// New, so a rule it does not understand fails New, naming the table, line and rule,
// even in a chain no packet reaches; a jump to an undeclared chain fails too. The
// Tracer is immutable and safe for concurrent use. It is pure: it never reads the
// kernel and does not log.
//
// The packet is walked through the built-in chains in netfilter's order for its path
// (tables by priority at each hook: raw, mangle, nat (DNAT), filter, security, nat
// (SNAT)):
//
//   - arriving, to a non-local address: PREROUTING -> FORWARD -> POSTROUTING
//   - arriving, to a local address:     PREROUTING -> INPUT
//   - locally generated:                OUTPUT -> POSTROUTING [-> PREROUTING(lo) ->
//     INPUT if the final destination is local; nat is not re-run there because the
//     connection's NAT is already decided]
//
// With a Balancer (IPVS, internal/trace/ipvstrace), ip_vs_in runs where the kernel
// registers it: at INPUT between security (50) and nat (100), priority 99, and at
// OUTPUT between nat (-100) and filter (0), priority -98. A packet it DNATs to a
// real server that is not local is taken out of the hook and sent by IPVS itself
// through OUTPUT (no input interface; nat does not run again) and POSTROUTING
// (ip_vs_nat_send_or_cont), so nat INPUT never sees it; to a local real server it
// goes on through the hook. A virtual server without a real server ends the trace
// with Reject (IPVS answers ICMP port unreachable). IPVS drops what it will not
// route: from a loopback source to a real server elsewhere, and an arriving packet
// to a loopback real server. IPVS does not look at a packet
// it handled again (ipvs_property); one it untracks (Balancing.Untracked) is
// untracked for conntrack and nat from there on.
//
// The routing decision (INPUT vs FORWARD) is taken after PREROUTING with the
// destination after any DNAT. Addresses are local when listed in localAddresses or
// loopback; "-m addrtype" sees LOCAL for those, MULTICAST, BROADCAST
// (255.255.255.255) or UNICAST for the others.
//
// Semantics modelled, as nfttrace models them:
//   - nat chains run only for packets whose conntrack state is "new"; once a binding
//     is made at a hook (DNAT in PREROUTING/OUTPUT, SNAT/MASQUERADE in
//     POSTROUTING/INPUT), or a nat chain of that manip type ran without making
//     one (the kernel's null binding), later nat chains of that type are skipped;
//   - DNAT, SNAT and MASQUERADE are terminal (they accept the packet for that
//     built-in chain); ACCEPT ends the current table's built-in chain only; DROP
//     and REJECT end the trace (verdicts Drop and Reject); RETURN, or the end of a
//     built-in chain, applies the chain's policy; -g does not come back;
//   - "-m statistic --mode random --probability P" is explored exhaustively: the
//     first path takes the match, and each trace.Outcome carries the probability of
//     its path (so an endpoint's share is the sum of its outcomes' probabilities);
//   - "-m recent" lists are not learnt while tracing: they are empty unless given
//     with WithRecent (as nfttrace's affinity sets are empty unless the test fills
//     them), so "--set" always matches and records nothing, "--rcheck"/"--update"/
//     "--remove" match a listed address (masked by --mask), and "--seconds", "--reap"
//     and "--rttl" never exclude an entry;
//   - "-m conntrack --ctstate" sees the packet's state, and the virtual states DNAT
//     and SNAT once this trace made such a binding; "--ctstatus" sees no status for
//     a new connection (CONFIRMED after POSTROUTING/INPUT), SEEN_REPLY, ASSURED and
//     CONFIRMED for an established one, EXPECTED for a related one;
//   - "-j NOTRACK" and "-j CT --notrack" (raw table) make the packet untracked, so
//     nat skips it, as in the kernel; CT's other options, LOG, NFLOG and TRACE
//     change nothing; MARK in all its spellings changes the packet mark;
//   - targets used where the kernel would refuse them (DNAT outside PREROUTING/
//     OUTPUT, SNAT outside POSTROUTING/INPUT, MASQUERADE outside POSTROUTING,
//     REJECT outside INPUT/FORWARD/OUTPUT) are errors naming the rule.
//
// Supported syntax (anything else is an error naming the rule):
//
//	generic:  [!] -s|-d ADDR[/LEN] (also --source, --src, --destination, --dst),
//	          [!] -p tcp|udp|sctp|icmp|ipv6-icmp|dccp|udplite|all,
//	          [!] -i|-o NAME (NAME+ is a prefix), -c P B, "[P:B]" counters
//	matches:  comment --comment; nfacct --nfacct-name (counts only);
//	          tcp|udp|sctp [!] --dport|--sport N[:M] (also implied by -p);
//	          multiport [!] --dports|--sports|--ports LIST;
//	          addrtype [!] --src-type|--dst-type LOCAL|UNICAST|MULTICAST|BROADCAST[,...];
//	          conntrack [!] --ctstate NEW,ESTABLISHED,RELATED,INVALID,UNTRACKED,SNAT,DNAT,
//	          [!] --ctstatus NONE,EXPECTED,SEEN_REPLY,ASSURED,CONFIRMED; state [!] --state;
//	          mark [!] --mark V[/M]; statistic --mode random [!] --probability P;
//	          recent [!] --set|--rcheck|--update|--remove --name N --mask M
//	          --rsource|--rdest --seconds S --reap --rttl
//	targets:  ACCEPT, DROP, RETURN, REJECT [--reject-with T], -j|-g CHAIN,
//	          DNAT --to-destination A[:P]|[A6]:P [--random] [--persistent],
//	          SNAT --to-source (same) [--random[-fully]] [--persistent],
//	          MASQUERADE [--to-ports P] [--random[-fully]],
//	          MARK --set-xmark|--set-mark V[/M], --and-mark|--or-mark|--xor-mark V,
//	          LOG, NFLOG, TRACE (no-ops), NOTRACK, CT [--notrack] [--zone ...]
//
// Not supported (errors): socket, limit and any other match module; physdev's
// other options; set's options other than --match-set; set entries with nomatch or
// of other types (a rule matching a set not given fails the trace);
// addrtype's --limit-iface-in/--limit-iface-out (which address is on which
// interface is not modelled); statistic --mode nth; recent --hitcount; address and
// port ranges in NAT targets; non-CIDR netmasks; the other extension targets
// (CONNMARK, REDIRECT, TPROXY, ...); -f.
package ipttrace
