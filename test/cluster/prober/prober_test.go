package prober

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/testing/poll"
)

// fakeNet answers every probe in memory (net.Pipe) as netexec would, with the
// target's address as the hostname, unless the target is down.
type fakeNet struct {
	mu   sync.Mutex
	down map[string]bool
}

func (f *fakeNet) setDown(addr string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[addr] = down
}

func (f *fakeNet) dial(_ context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	down := f.down[addr]
	f.mu.Unlock()
	if down {
		return nil, fmt.Errorf("dial %s %s: connection refused (fake)", network, addr)
	}
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		_ = server.SetDeadline(time.Now().Add(5 * time.Second))
		if network[:3] == "udp" {
			buf := make([]byte, 64)
			if _, err := server.Read(buf); err == nil {
				_, _ = server.Write([]byte(addr))
			}
			return
		}
		if _, err := http.ReadRequest(bufio.NewReader(server)); err == nil {
			_, _ = fmt.Fprintf(server, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(addr), addr)
		}
	}()
	return client, nil
}

func counted(s Summary) (attempts, pending int) {
	for _, t := range s.Targets {
		attempts += t.Attempts
		pending += t.Pending
	}
	return attempts, pending
}

func TestProberSchedulesAndSummarises(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	fn := &fakeNet{down: map[string]bool{}}
	targets, err := ParseTargets([]string{"tcp://192.0.2.1:80", "udp://[2001:db8::2]:80"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var transitions []Transition
	p, err := New(Config{Name: "test", Targets: targets, Rate: 10, Clock: fc, Dial: fn.dial, OnTransition: func(tr Transition) {
		mu.Lock()
		defer mu.Unlock()
		transitions = append(transitions, tr)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of the cancellation")
		}
	}()

	// 10 probes a second per target over 2 targets: a launch every 50ms, alternating.
	settled := func(want int) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("%d probes counted and the scheduler waiting", want), func() bool {
			a, pending := counted(p.Summary())
			return a == want && pending == 0 && fc.HasWaiters()
		})
	}
	for k := range 12 {
		settled(k + 1) // launch k happened at k*50ms
		switch k {
		case 5: // the TCP target's launches at +300ms and +400ms fail
			fn.setDown("192.0.2.1:80", true)
		case 9:
			fn.setDown("192.0.2.1:80", false)
		}
		fc.Step(50 * time.Millisecond) // launch k+1
	}
	settled(13) // launch 12 happened at +600ms, the end of the window
	s := p.Reset()
	if s.Prober != "test" || s.Window != 0 || !s.Start.Equal(t0) || !s.End.Equal(at(600)) || s.Rate != 10 || s.Timeout != Duration(time.Second) {
		t.Errorf("window 0 header = %q #%d %v..%v rate %v timeout %v", s.Prober, s.Window, s.Start, s.End, s.Rate, s.Timeout)
	}
	tcp, _ := s.Target("tcp://192.0.2.1:80")
	wantOutage := Outage{Duration: Duration(300 * time.Millisecond), From: at(200), To: at(500)}
	if tcp.Attempts != 7 || tcp.Failures != 2 || tcp.LongestOutage != wantOutage || tcp.Backends["192.0.2.1:80"] != 5 {
		t.Errorf("TCP target: attempts %d failures %d outage %+v backends %v; want 7, 2, %+v, 5 answers", tcp.Attempts, tcp.Failures, tcp.LongestOutage, tcp.Backends, wantOutage)
	}
	if len(tcp.FirstErrors) != 2 || !tcp.FirstErrors[0].Time.Equal(at(300)) || !tcp.FirstErrors[1].Time.Equal(at(400)) {
		t.Errorf("TCP target's errors = %+v, want the probes started at +300ms and +400ms", tcp.FirstErrors)
	}
	udp, _ := s.Target("udp://[2001:db8::2]:80")
	if udp.Attempts != 6 || udp.Failures != 0 || udp.LongestOutage.Duration != 0 || udp.Backends["[2001:db8::2]:80"] != 6 {
		t.Errorf("UDP target: attempts %d failures %d outage %v backends %v; want 6, 0, none, 6 answers", udp.Attempts, udp.Failures, udp.LongestOutage, udp.Backends)
	}
	mu.Lock()
	got := transitions
	mu.Unlock()
	if len(got) != 2 || got[0].OK || !got[0].Time.Equal(at(300)) || got[0].Err == nil || !got[1].OK || got[1].Outage != 300*time.Millisecond {
		t.Errorf("transitions = %+v, want failing at +300ms, recovered after 300ms", got)
	}

	next := p.Summary()
	if a, _ := counted(next); next.Window != 1 || !next.Start.Equal(at(600)) || a != 0 {
		t.Errorf("after Reset: window %d from %v with %d probes, want window 1 from +600ms, empty", next.Window, next.Start, a)
	}

	// A stall of a second skips the missed slots: one probe per target, not twenty.
	fc.Step(time.Second)
	settled(2)
	s = p.Summary()
	for _, ts := range s.Targets {
		if ts.Attempts != 1 {
			t.Errorf("after a stall, %s was probed %d times, want 1", ts.Target, ts.Attempts)
		}
	}
}

func TestProberRunStopsAfterInFlightProbes(t *testing.T) {
	target, _ := ParseTarget("udp://192.0.2.9:80")
	started := make(chan struct{})
	release := make(chan struct{})
	dial := func(context.Context, string, string) (net.Conn, error) {
		close(started)
		<-release
		return nil, errors.New("released")
	}
	p, err := New(Config{Targets: []Target{target}, Rate: 0.001, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first probe did not start within 10s")
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with a probe in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its last probe")
	}
	if ts := p.Summary().Targets[0]; ts.Attempts != 1 || ts.Failures != 1 || ts.FirstErrors[0].Error != "released" {
		t.Errorf("summary = %+v, want the one probe, failed as the dialer said (not cancelled)", ts)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Error("a second Run: want an error")
	}
}

func TestNewRejects(t *testing.T) {
	target, _ := ParseTarget("tcp://192.0.2.1:80")
	for name, cfg := range map[string]Config{
		"no targets":       {},
		"negative rate":    {Targets: []Target{target}, Rate: -1},
		"negative timeout": {Targets: []Target{target}, Timeout: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New with %s: want an error", name)
		}
	}
	p, err := New(Config{Targets: []Target{target}})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Summary(); s.Rate != DefaultRate || s.Timeout != Duration(DefaultTimeout) {
		t.Errorf("defaults: rate %v timeout %v, want %v and %v", s.Rate, s.Timeout, DefaultRate, DefaultTimeout)
	}
}
