package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

func report(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	from := fs.String("from", "http://"+DefaultListen, "the running prober's address")
	reset := fs.Bool("reset", false, "end the window (POST /reset) and print it")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of the request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("report: unexpected arguments %q", fs.Args())
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	method, path := http.MethodGet, "/summary"
	if *reset {
		method, path = http.MethodPost, "/reset"
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(*from, "/")+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	// Check it is a Summary, so a driver never takes something else for one.
	var s prober.Summary
	if err := json.Unmarshal(body, &s); err != nil {
		return fmt.Errorf("%s %s: not a summary: %w", method, req.URL, err)
	}
	_, err = out.Write(body)
	return err
}
