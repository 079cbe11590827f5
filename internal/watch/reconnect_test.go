package watch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeServer is the transport under reconnectTransport: while down, every request
// fails as a refused connection does.
type fakeServer struct {
	mu    sync.Mutex
	down  bool
	err   error // returned instead, when set (a failure that is not a refused dial)
	calls int
}

func (f *fakeServer) RoundTrip(*http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	switch {
	case f.err != nil:
		return nil, f.err
	case f.down:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func (f *fakeServer) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeServer) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

const testInterval = time.Second

func newTestReconnect(next http.RoundTripper) (*reconnectTransport, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	return newReconnectTransport(next, klog.Background(), clk, testInterval), clk
}

type result struct {
	resp *http.Response
	err  error
}

func roundTrip(ctx context.Context, t *testing.T, rt http.RoundTripper, method string) <-chan result {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "https://192.0.2.1:6443/api/v1/services", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req) //nolint:bodyclose // the test closes it
		done <- result{resp, err}
	}()
	return done
}

// awaitWaiters waits (bounded) until n timers are pending on clk.
func awaitWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %d requests to wait for their retry; %d do", n, clk.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}

func awaitResult(t *testing.T, done <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-done:
		if r.resp != nil {
			_ = r.resp.Body.Close()
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10 s for %s", what)
		return result{}
	}
}

func TestReconnectRetriesRefusedGET(t *testing.T) {
	server := &fakeServer{down: true}
	rt, clk := newTestReconnect(server)
	done := roundTrip(t.Context(), t, rt, http.MethodGet)
	awaitWaiters(t, clk, 1)
	if n := server.callCount(); n != 1 {
		t.Fatalf("%d calls before the retry, want 1", n)
	}
	// Still down at the first retry: the request waits again.
	clk.Step(testInterval + testInterval/10)
	awaitWaiters(t, clk, 1)
	server.set(false)
	clk.Step(testInterval + testInterval/10)
	r := awaitResult(t, done, "the GET once the server is back")
	if r.err != nil || r.resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %v, %v; want the server's answer", r.resp, r.err)
	}
	if n := server.callCount(); n != 3 {
		t.Errorf("%d calls, want 3 (the first, a retry while down, a retry once back)", n)
	}
	if rt.down.Load() {
		t.Error("still marked down after an answer")
	}
}

// TestReconnectOthersGoAtOnce: retries are spread an interval apart across
// requests, and when one gets through the others go at once, without waiting for
// their own turn.
func TestReconnectOthersGoAtOnce(t *testing.T) {
	server := &fakeServer{down: true}
	rt, clk := newTestReconnect(server)
	var dones []<-chan result
	for range 3 {
		dones = append(dones, roundTrip(t.Context(), t, rt, http.MethodGet))
	}
	awaitWaiters(t, clk, 3)
	// One interval on: exactly one of the three has had its turn.
	clk.Step(testInterval + testInterval/10)
	awaitWaiters(t, clk, 3)
	if n := server.callCount(); n != 4 {
		t.Fatalf("%d calls after one interval, want 4 (3 first tries, one retry): retries are not spread", n)
	}
	server.set(false)
	clk.Step(testInterval)
	for i, done := range dones {
		if r := awaitResult(t, done, "every GET once one got through"); r.err != nil {
			t.Errorf("GET %d: %v", i, r.err)
		}
	}
	if n := server.callCount(); n != 7 {
		t.Errorf("%d calls, want 7", n)
	}
}

func TestReconnectLeavesOtherFailures(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		err          error
	}{
		{"POST refused", http.MethodPost, nil},
		{"GET cut after connecting", http.MethodGet, io.ErrUnexpectedEOF},
		{"GET reset", http.MethodGet, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := &fakeServer{down: true, err: tc.err}
			rt, _ := newTestReconnect(server)
			r := awaitResult(t, roundTrip(t.Context(), t, rt, tc.method), "the request's error")
			if r.err == nil {
				t.Fatal("no error")
			}
			if n := server.callCount(); n != 1 {
				t.Errorf("%d calls, want 1: this failure is not retried", n)
			}
		})
	}
}

func TestReconnectStopsWithContext(t *testing.T) {
	server := &fakeServer{down: true}
	rt, clk := newTestReconnect(server)
	ctx, cancel := context.WithCancel(t.Context())
	done := roundTrip(ctx, t, rt, http.MethodGet)
	awaitWaiters(t, clk, 1)
	cancel()
	r := awaitResult(t, done, "the GET to give up when its context ended")
	var op *net.OpError
	if !errors.As(r.err, &op) || op.Op != "dial" {
		t.Errorf("error %v, want the refused dial", r.err)
	}
}

// TestClientWaitsForAPIServer: a client built from RESTConfig, asked for Services
// while nothing listens at the server's address, gets them once a server starts
// there, where client-go alone fails at once with the refused connection.
func TestClientWaitsForAPIServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{})
	var once sync.Once
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, "API server unreachable") {
			once.Do(func() { close(refused) })
		}
	}, funcr.Options{})
	ctx, cancel := context.WithTimeout(klog.NewContext(t.Context(), logger), 30*time.Second)
	defer cancel()
	client, err := NewClient(ctx, ClientConnection{Master: "http://" + addr, ContentType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		done <- err
	}()
	select {
	case <-refused:
	case err := <-done:
		t.Fatalf("the list returned (%v) before saying the API server was unreachable", err)
	case <-ctx.Done():
		t.Fatal("waited 30 s for the client to find the API server unreachable")
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	server.Listener = l
	server.Start()
	defer server.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("list after the server came: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("waited 30 s for the list to go through once the server listened")
	}
}
