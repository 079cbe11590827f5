package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Outcome classifies a probe.
type Outcome string

const (
	Answered    Outcome = "answered"
	Refused     Outcome = "refused"     // TCP RST or ICMP port unreachable
	Unreachable Outcome = "unreachable" // ICMP host/network unreachable or prohibited
	TimedOut    Outcome = "timeout"
	Failed      Outcome = "failed" // anything else; see Err
)

// DefaultProbeTimeout bounds one probe.
const DefaultProbeTimeout = time.Second

// Probe describes one request to a lab backend.
type Probe struct {
	Protocol v1.Protocol // TCP (default) or UDP
	Target   netip.AddrPort
	Timeout  time.Duration  // DefaultProbeTimeout when zero
	Source   netip.AddrPort // optional local address/port
}

// ProbeResult is what a probe observed.
type ProbeResult struct {
	Outcome Outcome
	Reply   Reply // when Answered
	Err     error // the underlying error, if any
	Elapsed time.Duration
}

func (r ProbeResult) String() string {
	switch r.Outcome {
	case Answered:
		return r.Reply.String()
	case Failed:
		return fmt.Sprintf("failed: %v", r.Err)
	default:
		return string(r.Outcome)
	}
}

// Probe sends one request of proto to target from inside the namespace.
func (n *NS) Probe(ctx context.Context, proto v1.Protocol, target netip.AddrPort) ProbeResult {
	return n.ProbeWith(ctx, Probe{Protocol: proto, Target: target})
}

// ProbeWith runs p from inside the namespace.
func (n *NS) ProbeWith(ctx context.Context, p Probe) ProbeResult {
	start := time.Now()
	res := n.probe(ctx, p)
	res.Elapsed = time.Since(start)
	return res
}

func (n *NS) probe(ctx context.Context, p Probe) ProbeResult {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	network := "tcp"
	if p.Protocol == v1.ProtocolUDP {
		network = "udp"
	}
	if p.Target.Addr().Unmap().Is4() {
		network += "4"
	} else {
		network += "6"
	}
	d := &net.Dialer{}
	if p.Source.IsValid() {
		if network[:3] == "tcp" {
			d.LocalAddr = net.TCPAddrFromAddrPort(p.Source)
		} else {
			d.LocalAddr = net.UDPAddrFromAddrPort(p.Source)
		}
	}
	conn, err := n.DialWith(ctx, d, network, p.Target.String())
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	if network[:3] == "udp" {
		if _, err := conn.Write([]byte("probe\n")); err != nil {
			return classify(err)
		}
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return classify(err)
	}
	r, err := ParseReply(line)
	if err != nil {
		return ProbeResult{Outcome: Failed, Err: err}
	}
	return ProbeResult{Outcome: Answered, Reply: r}
}

func classify(err error) ProbeResult {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ProbeResult{Outcome: Refused, Err: err}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return ProbeResult{Outcome: Unreachable, Err: err}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ProbeResult{Outcome: TimedOut, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ProbeResult{Outcome: TimedOut, Err: err}
	}
	return ProbeResult{Outcome: Failed, Err: err}
}
