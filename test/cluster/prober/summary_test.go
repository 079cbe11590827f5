package prober

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummaryJSON(t *testing.T) {
	s := Summary{
		Prober: "pod on node-1", Window: 2, Start: t0, End: at(10000), Rate: 20, Timeout: Duration(time.Second),
		Targets: []TargetSummary{{
			Target: "udp://[fd00:10:96::5]:80", Attempts: 200, Successes: 199, Failures: 1,
			FirstErrors:   []ProbeError{{Time: at(500), Error: "receive: i/o timeout"}},
			LastError:     &ProbeError{Time: at(500), Error: "receive: i/o timeout"},
			LongestOutage: Outage{Duration: Duration(100 * time.Millisecond), From: at(450), To: at(550)},
			LastSuccess:   at(9950),
			Backends:      map[string]int{"backend-a": 100, "backend-b": 99},
		}, {
			Target: "tcp://10.96.0.5:80",
		}},
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"timeout":"1s"`, `"longestOutage":{"duration":"100ms","from":`, `"longestOutage":{"duration":"0s"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}

	var d Duration
	if err := json.Unmarshal([]byte(`1500000000`), &d); err != nil || d != Duration(1500*time.Millisecond) {
		t.Errorf("Duration from nanoseconds = %v, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("Duration from \"soon\": want an error")
	}
}

func TestMerge(t *testing.T) {
	a := Summary{Prober: "pod on node-1", Window: 1, Start: at(100), End: at(5000), Rate: 20, Timeout: Duration(time.Second), Targets: []TargetSummary{
		{Target: "tcp://10.96.0.5:80", Attempts: 10, Successes: 9, Failures: 1,
			FirstErrors: []ProbeError{{Time: at(300), Error: "a1"}}, LastError: &ProbeError{Time: at(300), Error: "a1"},
			LongestOutage: Outage{Duration: Duration(100 * time.Millisecond)}, LastSuccess: at(4900), Backends: map[string]int{"x": 9}},
	}}
	b := Summary{Prober: "pod on node-2", Window: 1, Start: at(0), End: at(4000), Rate: 20, Timeout: Duration(time.Second), Targets: []TargetSummary{
		{Target: "udp://10.96.0.5:80", Attempts: 5, Successes: 5, Backends: map[string]int{"y": 5}},
		{Target: "tcp://10.96.0.5:80", Attempts: 10, Successes: 5, Failures: 5, Pending: 1,
			FirstErrors: []ProbeError{{Time: at(200), Error: "b1"}, {Time: at(250), Error: "b2"}, {Time: at(260), Error: "b3"}, {Time: at(270), Error: "b4"}, {Time: at(280), Error: "b5"}},
			LastError:   &ProbeError{Time: at(400), Error: "b9"}, OutageOpen: true,
			LongestOutage: Outage{Duration: Duration(300 * time.Millisecond), Open: true}, LastSuccess: at(3000), Backends: map[string]int{"x": 2, "y": 3}},
	}}
	got := Merge(a, b)
	want := Summary{Prober: "pod on node-1+pod on node-2", Window: 1, Start: at(0), End: at(5000), Rate: 20, Timeout: Duration(time.Second), Targets: []TargetSummary{
		{Target: "tcp://10.96.0.5:80", Attempts: 20, Successes: 14, Failures: 6, Pending: 1,
			FirstErrors: []ProbeError{{Time: at(200), Error: "b1"}, {Time: at(250), Error: "b2"}, {Time: at(260), Error: "b3"}, {Time: at(270), Error: "b4"}, {Time: at(280), Error: "b5"}},
			LastError:   &ProbeError{Time: at(400), Error: "b9"}, OutageOpen: true,
			LongestOutage: Outage{Duration: Duration(300 * time.Millisecond), Open: true}, LastSuccess: at(4900), Backends: map[string]int{"x": 11, "y": 3}},
		{Target: "udp://10.96.0.5:80", Attempts: 5, Successes: 5, Backends: map[string]int{"y": 5}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	if a.Targets[0].Backends["x"] != 9 || len(a.Targets[0].FirstErrors) != 1 {
		t.Error("Merge modified its input")
	}
	if got.Failures() != 6 || got.LongestOutage().Duration != Duration(300*time.Millisecond) {
		t.Errorf("merged Failures() %d, LongestOutage() %v; want 6, 300ms", got.Failures(), got.LongestOutage())
	}
	b.Window, b.Rate = 2, 10
	if m := Merge(a, b); m.Window != -1 || m.Rate != 0 || m.Timeout != Duration(time.Second) {
		t.Errorf("Merge of different windows/rates: window %d rate %v timeout %v; want -1, 0, 1s", m.Window, m.Rate, m.Timeout)
	}
	if m := Merge(); m.Targets != nil || m.Prober != "" {
		t.Errorf("Merge() = %+v, want the zero Summary", m)
	}
}
