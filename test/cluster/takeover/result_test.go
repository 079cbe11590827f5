package takeover

import (
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/test/cluster/prober"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func target(name string, attempts, failures int, outage time.Duration, backends int) prober.TargetSummary {
	ts := prober.TargetSummary{Target: name, Attempts: attempts, Successes: attempts - failures, Failures: failures, Backends: map[string]int{}}
	for i := range backends {
		ts.Backends[string(rune('a'+i))] = 1
	}
	if failures > 0 {
		ts.FirstErrors = []prober.ProbeError{{Time: at(1500), Error: "dial tcp4 10.96.0.5:80: connect: connection refused"}}
		ts.LongestOutage = prober.Outage{Duration: prober.Duration(outage), From: at(1450), To: at(1450).Add(outage)}
	}
	return ts
}

func result() Result {
	return Result{
		Label: "iptables", Namespace: "kproxy-takeover", ClusterIPs: []string{"10.96.0.5", "fd00:10:96::5"}, NodePortTCP: 30080, NodePortUDP: 30081,
		Phases: []Phase{{
			Name: "kproxy.local/kproxy:dev", Image: "kproxy.local/kproxy:dev", Rollout: prober.Duration(21340 * time.Millisecond),
			Probers: []ProberSummary{
				{Location: "pod on node-1", Summary: prober.Summary{Targets: []prober.TargetSummary{
					target("tcp://10.96.0.5:80", 640, 0, 0, 3), target("udp://[fd00:10:96::5]:80", 640, 0, 0, 3),
				}}},
				{Location: External, Summary: prober.Summary{Targets: []prober.TargetSummary{target("tcp://192.0.2.11:30080", 640, 0, 0, 3)}}},
			},
		}, {
			Name: "registry.k8s.io/kube-proxy:v1.37.2", Image: "registry.k8s.io/kube-proxy:v1.37.2", Rollout: prober.Duration(18 * time.Second),
			Probers: []ProberSummary{
				{Location: "pod on node-1", Summary: prober.Summary{Targets: []prober.TargetSummary{target("tcp://10.96.0.5:80", 600, 0, 0, 3)}}},
			},
		}},
	}
}

func TestResultOK(t *testing.T) {
	r := result()
	if fs := r.Failures(MaxOutage); len(fs) != 0 || !r.OK(MaxOutage) {
		t.Errorf("a clean result fails: %v", fs)
	}
}

func TestResultFailures(t *testing.T) {
	r := result()
	r.Phases[0].Probers[0].Summary.Targets[1] = target("udp://[fd00:10:96::5]:80", 640, 3, 150*time.Millisecond, 3)
	r.Phases[0].Probers[1].Summary.Targets[0] = target("tcp://192.0.2.11:30080", 640, 30, 1500*time.Millisecond, 3)
	r.Phases[1].Probers[0].Summary.Targets[0].Attempts = 0
	r.Phases = append(r.Phases, Phase{Name: "kproxy.local/kproxy:dev", Image: "kproxy.local/kproxy:dev", Err: "roll out kube-proxy image kproxy.local/kproxy:dev: timed out"})
	got := r.Failures(MaxOutage)
	want := []string{
		"phase kproxy.local/kproxy:dev, pod on node-1, udp://[fd00:10:96::5]:80: 3 of 640 probes failed (the first at 03:04:06.500: dial tcp4 10.96.0.5:80: connect: connection refused)",
		"phase kproxy.local/kproxy:dev, external, tcp://192.0.2.11:30080: 30 of 640 probes failed (the first at 03:04:06.500: dial tcp4 10.96.0.5:80: connect: connection refused)",
		"phase kproxy.local/kproxy:dev, external, tcp://192.0.2.11:30080: outage of 1.5s (over 1s), from 03:04:06.450 to 03:04:07.950",
		"phase registry.k8s.io/kube-proxy:v1.37.2, pod on node-1, tcp://10.96.0.5:80: no probe counted",
		"phase kproxy.local/kproxy:dev: roll out kube-proxy image kproxy.local/kproxy:dev: timed out",
		"phase kproxy.local/kproxy:dev: no prober reported",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.OK(MaxOutage) {
		t.Error("OK with failures")
	}
	// A looser bound drops the outage, not the failed probes.
	if n := len(r.Failures(2 * time.Second)); n != len(want)-1 {
		t.Errorf("with a 2s bound, %d failures, want %d", n, len(want)-1)
	}
	if fs := (Result{}).Failures(MaxOutage); len(fs) != 1 || fs[0] != "no phase ran" {
		t.Errorf("an empty result: %v, want [no phase ran]", fs)
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := result().WriteMarkdown(&b, MaxOutage); err != nil {
		t.Fatal(err)
	}
	want := `### Takeover: iptables

Service kproxy-takeover/backend: ClusterIPs 10.96.0.5, fd00:10:96::5, NodePorts 30080/TCP and 30081/UDP.

| phase | rollout | prober | target | attempts | failures | longest outage | backends |
|---|---:|---|---|---:|---:|---:|---:|
| kproxy.local/kproxy:dev | 21.3s | pod on node-1 | tcp://10.96.0.5:80 | 640 | 0 | none | 3 |
| kproxy.local/kproxy:dev | 21.3s | pod on node-1 | udp://[fd00:10:96::5]:80 | 640 | 0 | none | 3 |
| kproxy.local/kproxy:dev | 21.3s | external | tcp://192.0.2.11:30080 | 640 | 0 | none | 3 |
| registry.k8s.io/kube-proxy:v1.37.2 | 18s | pod on node-1 | tcp://10.96.0.5:80 | 600 | 0 | none | 3 |

**Passed**: no probe failed and no outage exceeded 1s.
`
	if b.String() != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", b.String(), want)
	}

	r := result()
	r.Label = "a|b"
	r.Phases[0].Probers[1].Summary.Targets[0] = target("tcp://192.0.2.11:30080", 640, 30, 1500*time.Millisecond, 2)
	r.Phases = append(r.Phases, Phase{Name: BaselinePhase})
	b.Reset()
	if err := r.WriteMarkdown(&b, MaxOutage); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"### Takeover: a\\|b\n",
		"| kproxy.local/kproxy:dev | 21.3s | external | tcp://192.0.2.11:30080 | 640 | 30 | 1.5s | 2 |\n",
		"| baseline | - | - | - | - | - | - | - |\n",
		"**Failed** (no failed probe and no outage over 1s allowed):\n\n- phase kproxy.local/kproxy:dev, external, tcp://192.0.2.11:30080: 30 of 640 probes failed",
		"- phase baseline: no prober reported\n",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, b.String())
		}
	}
}
