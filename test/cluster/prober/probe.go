package prober

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// maxReply bounds what a probe reads of a reply: a hostname is short.
const maxReply = 1024

// Probe runs one probe of t: a new TCP connection with `GET /hostname`, or a new UDP
// socket sending "hostname" (agnhost netexec). It returns the backend's reply (its
// hostname), or why the probe failed. timeout bounds the whole probe; dial nil means
// net.Dialer.
func Probe(ctx context.Context, dial DialFunc, t Target, timeout time.Duration) (string, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, t.network(), t.Addr.String())
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return "", fmt.Errorf("set deadline: %w", err)
	}
	// The deadline bounds the exchange; a cancellation of the caller's context closes
	// the connection.
	stop := context.AfterFunc(parent, func() { conn.Close() })
	defer stop()
	var reply string
	if t.Protocol == UDP {
		reply, err = udpExchange(conn)
	} else {
		reply, err = httpHostname(conn, t)
	}
	if err != nil && parent.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(parent))
	}
	return reply, err
}

func udpExchange(conn net.Conn) (string, error) {
	if _, err := conn.Write([]byte("hostname")); err != nil {
		return "", fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, maxReply)
	n, err := conn.Read(buf)
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	reply := strings.TrimSpace(string(buf[:n]))
	if reply == "" {
		return "", errors.New("empty reply")
	}
	return reply, nil
}

func httpHostname(conn net.Conn, t Target) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+t.Addr.String()+"/hostname", nil)
	if err != nil {
		return "", err
	}
	req.Close = true // Connection: close; one request per connection
	req.Header.Set("User-Agent", "kproxy-prober")
	if err := req.Write(conn); err != nil {
		return "", fmt.Errorf("send request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return "", fmt.Errorf("read response: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP status %s", resp.Status)
	}
	reply := strings.TrimSpace(string(body))
	if reply == "" {
		return "", errors.New("empty body")
	}
	return reply, nil
}
