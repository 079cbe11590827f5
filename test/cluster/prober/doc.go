// Package prober measures whether Services keep answering while something changes
// underneath them (the takeover test swaps kube-proxy for kproxy and back): it probes
// targets continuously and summarises, per target, how many probes failed, the longest
// outage and which backends answered.
//
// Targets are tcp://IP:PORT and udp://IP:PORT, with an IPv4 or IPv6 literal
// (tcp://10.96.0.5:80, udp://[fd00:10:96::5]:80); a target's family is its address's,
// never the other one. They are served by agnhost netexec: a TCP probe opens a
// connection and sends `GET /hostname HTTP/1.1`, and passes on a 200 with a non-empty
// body; a UDP probe sends the datagram "hostname" and passes on a non-empty reply.
//
// Contract:
//   - Every probe is a new flow: a new TCP connection, or a new UDP socket (so a new
//     ephemeral source port), so each one goes through the NAT rules afresh instead of
//     riding a conntrack entry made before a change.
//   - A Prober probes each target Rate times a second (DefaultRate), the targets'
//     probes staggered evenly over the interval, each bounded by Timeout
//     (DefaultTimeout). A stalled prober skips the slots it missed rather than bursting.
//   - Times are probe start times (taken from the Clock when the probe is launched):
//     a probe that fails says the target did not work when it started, which is only
//     known up to Timeout later. Results are folded in launch order, whatever order they
//     complete in.
//   - The longest outage of a target is the longest interval during which no probe of
//     it succeeded, from the start of the last successful probe before a failure (in
//     this window or an earlier one; the start of Run when none succeeded yet) to the
//     start of the next successful one; an outage still open when the summary is taken
//     counts up to then.
//     An interval without probes and without failures is not an outage.
//   - A Summary covers one window, from Run (or the last Reset) to when it is taken.
//     A probe is counted once it and every probe of its target launched before it have
//     completed, so each probe counts in exactly one window, and probes in flight at a
//     Reset count in the next one (TargetSummary.Pending says how many were launched
//     and not counted yet). Reset returns the window that ended and starts the next one
//     atomically, so consecutive windows leave no gap; Summary.Window numbers them (0
//     first), so a reader notices a prober that restarted. An outage that spans a Reset
//     counts in both windows: as open, up to the Reset, in the first, and whole in the
//     next.
//   - Run returns when its context ends, after the probes in flight have finished (at
//     most Timeout later); they are not cut short by the cancellation, so stopping a
//     prober records no spurious failures.
//   - Clock and Dial are injectable: the unit tests use a fake clock and in-memory
//     connections, and need neither root nor a network beyond loopback.
package prober
