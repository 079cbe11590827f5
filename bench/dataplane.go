package bench

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/test/lab"
)

// ConnectLatency holds TCP connect times through a ClusterIP and directly to the pods.
type ConnectLatency struct {
	ClusterIP, Direct []time.Duration
	Failures          int
}

// MeasureConnectLatency times n TCP connects (the handshake only; the socket is then
// reset, leaving no TIME_WAIT) from client to target's ClusterIP, interleaved with n
// connects directly to the backend pods in turn, so that noise hits both alike.
func MeasureConnectLatency(ctx context.Context, client *lab.Pod, target *Svc, backends []*lab.Pod, n int) (ConnectLatency, error) {
	var out ConnectLatency
	vip := netip.AddrPortFrom(target.ClusterIP, ServicePort).String()
	err := client.NS.Do(func() error {
		d := net.Dialer{Timeout: time.Second}
		connect := func(addr string) (time.Duration, bool) {
			start := time.Now()
			c, err := d.DialContext(ctx, "tcp4", addr)
			el := time.Since(start)
			if err != nil {
				return 0, false
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
			return el, true
		}
		for i := range n {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if el, ok := connect(vip); ok {
				out.ClusterIP = append(out.ClusterIP, el)
			} else {
				out.Failures++
			}
			direct := netip.AddrPortFrom(backends[i%len(backends)].IPs.V4, ServicePort).String()
			if el, ok := connect(direct); ok {
				out.Direct = append(out.Direct, el)
			} else {
				out.Failures++
			}
		}
		return nil
	})
	return out, err
}

// ConnectionRate is completed short connections per second.
type ConnectionRate struct {
	ClusterIP, Direct float64
	Failures          int64
}

// MeasureConnectionRate runs workers loops of short connections (connect, read the
// backend's one-line reply, close) for d, first through target's ClusterIP, then
// directly to the backend pods in turn, and returns the completed connections per second.
func MeasureConnectionRate(ctx context.Context, client *lab.Pod, target *Svc, backends []*lab.Pod, workers int, d time.Duration) (ConnectionRate, error) {
	var out ConnectionRate
	var failures atomic.Int64
	vip := netip.AddrPortFrom(target.ClusterIP, ServicePort).String()
	run := func(addr func(i int) string) (float64, error) {
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, workers)
		start := time.Now()
		end := start.Add(d)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[w] = client.NS.Do(func() error {
					dl := net.Dialer{Timeout: time.Second}
					buf := make([]byte, 256)
					for i := w; time.Now().Before(end) && ctx.Err() == nil; i += workers {
						c, err := dl.DialContext(ctx, "tcp4", addr(i))
						if err != nil {
							failures.Add(1)
							continue
						}
						_ = c.SetDeadline(time.Now().Add(time.Second))
						if _, err := bufio.NewReader(c).Read(buf); err != nil {
							failures.Add(1)
						} else {
							done.Add(1)
						}
						_ = c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT to exhaust ports
						_ = c.Close()
					}
					return nil
				})
			}()
		}
		wg.Wait()
		for _, e := range errs {
			if e != nil {
				return 0, e
			}
		}
		return float64(done.Load()) / time.Since(start).Seconds(), ctx.Err()
	}
	var err error
	if out.ClusterIP, err = run(func(int) string { return vip }); err != nil {
		return out, err
	}
	if out.Direct, err = run(func(i int) string {
		return netip.AddrPortFrom(backends[i%len(backends)].IPs.V4, ServicePort).String()
	}); err != nil {
		return out, err
	}
	out.Failures = failures.Load()
	return out, nil
}
