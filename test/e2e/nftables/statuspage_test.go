package nftables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

// chromiumPath is Debian's Chromium, which hack/setup.sh installs.
const chromiumPath = "/usr/bin/chromium"

// metricsAddress is the proxy's metrics server inside node1.
const metricsAddress = "127.0.0.1:10249"

// TestStatusPage loads the status page of a real proxy in a real headless
// Chromium: the node page shows the node, the mode, the Services and both charts
// with data; its search form filters the Services; a Service's link opens its page
// with its endpoints. Screenshots go to _output/status-page.png and
// _output/status-service.png.
func TestStatusPage(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if labtest.Required() {
			t.Fatalf("no Chromium at %s (hack/setup.sh installs the chromium package): %v", chromiumPath, err)
		}
		t.Skipf("no Chromium at %s (hack/setup.sh installs the chromium package)", chromiumPath)
	}
	p := sharedProxy(t)
	l := p.Lab
	ctx := testCtx(t, 3*time.Minute)

	one, two := l.Node1.Pods[0], l.Node2.Pods[0]
	alpha := createService(ctx, t, l, "status-alpha", nil, []lab.Endpoint{one.Endpoint(), two.Endpoint()}, nil)
	beta := createService(ctx, t, l, "status-beta", nil, []lab.Endpoint{two.Endpoint()}, nil)
	gamma := createService(ctx, t, l, "status-gamma", nil, nil, nil)
	waitExplained(ctx, t, p, alpha, 2)
	waitExplained(ctx, t, p, beta, 1)
	waitExplained(ctx, t, p, gamma, 0)
	for _, fam := range lab.Families {
		waitAnswered(ctx, t, p, one.NS, v1.ProtocolTCP, netip.AddrPortFrom(clusterIP(t, alpha, fam), 80), nil)
	}

	base := forwardToNamespace(t, l.Node1.NS, metricsAddress)
	out := outputDir(t)
	browser := startChromium(t)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(actx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The node page.
	run("loading the node page", chromedp.Navigate(base+"/kproxy/"), chromedp.WaitVisible(chromedp.CSS("#services")))
	if got := text(t, browser, "#node-name"); got != l.Node1.Name {
		t.Errorf("node name %q, want %q", got, l.Node1.Name)
	}
	if got := text(t, browser, "#mode"); got != proxyMode() {
		t.Errorf("mode %q, want %q", got, proxyMode())
	}
	rows := evaluate[[]string](t, browser, `Array.from(document.querySelectorAll("#services a.service"), a => a.textContent)`)
	for _, want := range []string{"default/status-alpha", "default/status-beta", "default/status-gamma"} {
		if !slices.Contains(rows, want) {
			t.Errorf("the Service table lacks %s: %v", want, rows)
		}
	}
	for _, chart := range []string{"#chart-durations", "#chart-programming"} {
		n := evaluate[int](t, browser, `document.querySelectorAll("`+chart+` svg circle.point").length`)
		if n < 1 {
			t.Errorf("%s: %d data points, want at least one", chart, n)
		}
	}
	writeScreenshot(t, browser, filepath.Join(out, "status-page.png"))

	// The search form: submitted as a human would, answered by the server.
	run("searching for status-be", chromedp.SetValue(chromedp.CSS("#q"), "status-be"), chromedp.Submit(chromedp.CSS("#q")))
	waitFor(t, browser, "the search's answer", func() (bool, string) {
		got, err := tryEvaluate[string](browser, `document.readyState + " " + location.search + " " + (document.querySelector("#service-count") || {}).textContent`)
		if err != nil {
			return false, err.Error()
		}
		return strings.HasPrefix(got, "complete ?q=status-be ") && strings.Contains(got, "matching"), got
	})
	rows = evaluate[[]string](t, browser, `Array.from(document.querySelectorAll("#services a.service"), a => a.textContent)`)
	if !slices.Equal(rows, []string{"default/status-beta"}) {
		t.Errorf("search status-be: Services %v, want only default/status-beta", rows)
	}

	// The explain link opens the Service's page, with its endpoint in both families.
	run("opening default/status-beta", chromedp.Click(chromedp.CSS(`a.service[href="/kproxy/services/default/status-beta"]`)))
	waitFor(t, browser, "the page of default/status-beta", func() (bool, string) {
		got, err := tryEvaluate[string](browser, `document.readyState + " " + ((document.querySelector("#service-name") || {}).textContent || "")`)
		if err != nil {
			return false, err.Error()
		}
		return got == "complete default/status-beta", got
	})
	endpoints := evaluate[[]string](t, browser, `Array.from(document.querySelectorAll("td.endpoint"), td => td.textContent)`)
	for _, fam := range lab.Families {
		want := netip.AddrPortFrom(two.IPs.Get(fam), 8080).String()
		if !slices.Contains(endpoints, want) {
			t.Errorf("the page of default/status-beta lacks the endpoint %s: %v", want, endpoints)
		}
	}
	writeScreenshot(t, browser, filepath.Join(out, "status-service.png"))
}

// text returns the text of the first element that matches css.
func text(t *testing.T, browser context.Context, css string) string {
	t.Helper()
	return evaluate[string](t, browser, `(document.querySelector("`+css+`") || {}).textContent || ""`)
}

// evaluate runs a JavaScript expression in the page and decodes its value (the
// test reads the page with it; the page itself has no script).
func evaluate[T any](t *testing.T, browser context.Context, expression string) T {
	t.Helper()
	v, err := tryEvaluate[T](browser, expression)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// tryEvaluate is evaluate for a page that may be navigating (an error then says
// so, and the caller tries again).
func tryEvaluate[T any](browser context.Context, expression string) (T, error) {
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expression))
}

// waitFor polls cond every 100 ms for at most 20 s, through navigations (cond
// reports a failed read as not met); last says what it saw.
func waitFor(t *testing.T, browser context.Context, what string, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not met after 20s (last: %q)", what, last)
		}
		select {
		case <-browser.Done():
			t.Fatalf("waiting for %s: the browser ended: %v", what, browser.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeScreenshot saves the whole page as PNG.
func writeScreenshot(t *testing.T, browser context.Context, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// outputDir is the repository's _output directory (created if needed), found from
// the test's working directory.
func outputDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			out := filepath.Join(d, "_output")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			return out
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// startChromium starts a headless Chromium with a fresh profile and returns its
// first tab's context. At the end of t the browser is closed, every process that
// runs with its profile is killed (also when the test failed), and the profile is
// removed.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	profile, err := os.MkdirTemp("", "kproxy-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	var output lockedBuffer
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
		chromedp.CombinedOutput(&output),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		if err := killProfileProcesses(profile); err != nil {
			t.Error(err)
		}
		if err := os.RemoveAll(profile); err != nil {
			t.Errorf("removing the Chromium profile: %v", err)
		}
		if t.Failed() {
			t.Logf("Chromium's output:\n%s", output.String())
		}
	})
	// The first action starts the browser, which lives as long as the context of
	// that action: bound the start with a timer, not a derived context.
	timer := time.AfterFunc(60*time.Second, cancelBrowser)
	err = chromedp.Do(browser)
	if !timer.Stop() {
		t.Fatalf("starting Chromium: not started after 60s\n%s", output.String())
	}
	if err != nil {
		t.Fatalf("starting Chromium: %v\n%s", err, output.String())
	}
	return browser
}

// killProfileProcesses kills every process whose command line names profile as its
// user data directory (Chromium passes it to its children), until none is left
// for a few looks in a row; it fails after 10 s.
func killProfileProcesses(profile string) error {
	want := []byte("--user-data-dir=" + profile)
	deadline := time.Now().Add(10 * time.Second)
	for quiet := 0; quiet < 3; {
		found := 0
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return fmt.Errorf("looking for Chromium processes: %w", err)
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !slices.ContainsFunc(bytes.Split(cmdline, []byte{0}), func(arg []byte) bool { return bytes.Equal(arg, want) }) {
				continue
			}
			found++
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("killing Chromium process %d: %w", pid, err)
			}
		}
		if found == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Chromium processes of %s still running after 10s", profile)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// lockedBuffer collects Chromium's output from its reader goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// forwardToNamespace listens on a loopback port of the test process's namespace
// and forwards each connection to target inside ns (the browser runs in the test
// process's namespace; the proxy's metrics server listens inside node1). It
// returns the listener's base URL; everything is closed at the end of t.
func forwardToNamespace(t *testing.T, ns *lab.NS, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	// track keeps c to close at the end; false when the end has come.
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		conns[c] = true
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer down.Close()
				if !track(down) {
					return
				}
				up, err := ns.Dial(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				if !track(up) {
					return
				}
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
				go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
				// Either side's end ends both: the deferred Closes stop the other copy.
				<-done
				down.Close()
				up.Close()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}
