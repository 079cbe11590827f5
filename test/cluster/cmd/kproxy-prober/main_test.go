package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

func TestReportAndReset(t *testing.T) {
	target, err := prober.ParseTarget("tcp://192.0.2.1:80")
	if err != nil {
		t.Fatal(err)
	}
	p, err := prober.New(prober.Config{Name: "test", Targets: []prober.Target{target}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(p))
	defer srv.Close()

	get := func(args ...string) prober.Summary {
		t.Helper()
		var out bytes.Buffer
		if err := report(append([]string{"--from", srv.URL}, args...), &out); err != nil {
			t.Fatalf("report %v: %v", args, err)
		}
		var s prober.Summary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatalf("report %v printed %q: %v", args, out.String(), err)
		}
		return s
	}
	if s := get(); s.Prober != "test" || s.Window != 0 || len(s.Targets) != 1 || s.Targets[0].Target != "tcp://192.0.2.1:80" {
		t.Errorf("report = %+v, want window 0 of test with its target", s)
	}
	if s := get("--reset"); s.Window != 0 {
		t.Errorf("report --reset returned window %d, want the one that ended (0)", s.Window)
	}
	if s := get(); s.Window != 1 {
		t.Errorf("after a reset, report shows window %d, want 1", s.Window)
	}

	var out bytes.Buffer
	if err := report([]string{"--from", srv.URL + "/nothing"}, &out); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("report from a wrong URL: %v, want a 404 error", err)
	}
}
