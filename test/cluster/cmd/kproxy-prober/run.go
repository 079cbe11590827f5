package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

// DefaultListen is where run serves its summary, and report reads it.
const DefaultListen = "127.0.0.1:9999"

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var urls []string
	fs.Func("target", "a target, tcp://IP:PORT or udp://IP:PORT (repeat, or comma-separated)", func(s string) error {
		for u := range strings.SplitSeq(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
		return nil
	})
	rate := fs.Float64("rate", prober.DefaultRate, "probes per second per target")
	timeout := fs.Duration("timeout", prober.DefaultTimeout, "bound of one probe")
	listen := fs.String("listen", DefaultListen, "address to serve /summary and /reset on")
	name := fs.String("name", "", "the prober's name in its summaries (default: the hostname)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	targets, err := prober.ParseTargets(urls)
	if err != nil {
		return err
	}
	if *name == "" {
		*name, _ = os.Hostname()
	}
	p, err := prober.New(prober.Config{
		Name: *name, Targets: targets, Rate: *rate, Timeout: *timeout,
		OnTransition: func(t prober.Transition) { logTransition(os.Stderr, t) },
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler(p), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "%s probing %d target(s) at %v/s each (timeout %v): %s; serving on %s\n",
		*name, len(targets), *rate, *timeout, strings.Join(urls, " "), l.Addr())
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	select {
	case err = <-runErr: // Run returns once ctx ends
	case err = <-served:
		stop()
		err = errors.Join(fmt.Errorf("serve: %w", err), <-runErr)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if err := writeJSON(os.Stdout, p.Summary()); err != nil {
		return err
	}
	return err
}

func handler(p *prober.Prober) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /summary", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = writeJSON(w, p.Summary())
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = writeJSON(w, p.Reset())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

func writeJSON(w io.Writer, s prober.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func logTransition(w io.Writer, t prober.Transition) {
	at := t.Time.Format(time.RFC3339Nano)
	if t.OK {
		fmt.Fprintf(w, "%s %s: answering again, after %v without a successful probe\n", at, t.Target, t.Outage.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(w, "%s %s: failing: %v\n", at, t.Target, t.Err)
}
