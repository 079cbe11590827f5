// Command kube-proxy is kproxy: a drop-in replacement for the Kubernetes network proxy.
// It accepts upstream kube-proxy's flags and KubeProxyConfiguration file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/app"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer klog.Flush()
	if app.IsToolInvocation(os.Args[1:]) {
		return app.ExecuteTool(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	return app.Execute(ctx, app.NewCommand(app.Run), os.Stderr)
}
