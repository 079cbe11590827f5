// Command kproxy-prober probes Services continuously (package
// github.com/kproxy/kproxy/test/cluster/prober) and serves what it saw, for the
// takeover test. It runs in a pod (image kproxy.local/prober:dev, ENTRYPOINT
// ["/kproxy-prober"]) and as a process outside the cluster.
//
// Usage:
//
//	kproxy-prober run --target URL [--target URL ...] [--rate N] [--timeout D] [--listen ADDR] [--name NAME]
//	kproxy-prober report [--from URL] [--reset] [--timeout D]
//
// run probes each target (tcp://IP:PORT or udp://IP:PORT; --target repeats or takes a
// comma-separated list) until SIGTERM or SIGINT, logs each target that starts failing
// or recovers on stderr, and serves at --listen (default 127.0.0.1:9999):
//
//	GET  /summary  the current window's Summary as JSON
//	POST /reset    ends the window, answers with its Summary, and starts the next one
//	GET  /healthz  "ok"
//
// On exit it prints the last window's Summary on stdout. report fetches /summary (or,
// with --reset, POSTs /reset) from --from (default http://127.0.0.1:9999) and prints
// the JSON, so a driver can `kubectl exec POD -- /kproxy-prober report`.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  kproxy-prober run --target URL [--target URL ...] [--rate N] [--timeout D] [--listen ADDR] [--name NAME]
  kproxy-prober report [--from URL] [--reset] [--timeout D]`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "report":
		err = report(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "kproxy-prober: unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-prober:", err)
		os.Exit(1)
	}
}
