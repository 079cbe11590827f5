// Package daemon is the end-to-end test of the kube-proxy daemon against the lab's
// real API server: start-up, health and metrics servers, the Starting event, Services
// programmed into the kernel, and riding out an API server restart.
package daemon

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab/labtest"
)

var suite = &labtest.Suite{}

func TestMain(m *testing.M) {
	code := suite.Main(m)
	proxytest.RemoveBinary()
	os.Exit(code)
}

var (
	proxyOnce sync.Once
	proxy     *proxytest.Proxy
	proxyErr  error
)

// sharedProxy starts one proxy for the package and waits until it is healthy.
func sharedProxy(t *testing.T) *proxytest.Proxy {
	t.Helper()
	l := suite.Lab(t)
	proxyOnce.Do(func() {
		proxy, proxyErr = proxytest.Start(l, proxytest.Options{})
		if proxyErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		proxyErr = proxy.WaitHealthy(ctx, 60*time.Second)
	})
	if proxyErr != nil {
		t.Fatalf("starting kube-proxy: %v", proxyErr)
	}
	return proxy
}
