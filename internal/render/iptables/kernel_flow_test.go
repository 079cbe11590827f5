package iptables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/trace/ipttrace"
)

// TestKernelFlows programs every flow scenario with the real binaries of each
// backend in a private network namespace (the jump rules inserted as the proxier
// does, then the full sync through iptables-restore), reads every table back with
// iptables-save, whose spelling is the kernel's ("-m tcp" added, options
// reordered, counters, every table's built-in chains), and traces the same flows
// through that: each must give what it gives on the rendered rules, outcome by
// outcome (verdict, NAT, masquerade, mark, probability).
func TestKernelFlows(t *testing.T) {
	backends := map[v1.IPFamily][]backend{
		v1.IPv4Protocol: kernelBackends(t, v1.IPv4Protocol),
		v1.IPv6Protocol: kernelBackends(t, v1.IPv6Protocol),
	}
	for _, sc := range flowScenarios() {
		family := sc.cfg.Family
		for _, b := range backends[family] {
			t.Run(string(b)+"/"+sc.name, func(t *testing.T) {
				k := newKernel(t, b, family)
				for _, j := range JumpRules() {
					if _, err := run(k.ns, nil, binary(b, family, ""), "-w", "5", "-t", string(j.Table), "-N", j.Target); err != nil &&
						!strings.Contains(err.Error(), "exists") {
						t.Fatal(err)
					}
					if _, err := run(k.ns, nil, append([]string{binary(b, family, ""), "-w", "5", "-t", string(j.Table), "-I", j.Chain, "1"}, j.Args...)...); err != nil {
						t.Fatal(err)
					}
				}
				input, _ := fullInput(sc.cfg, sc.views...)
				k.restore(input)
				save, err := run(k.ns, nil, binary(b, family, "-save"), "--counters")
				if err != nil {
					t.Fatal(err)
				}
				v6 := family == v1.IPv6Protocol
				fromKernel, err := ipttrace.New([]byte(save), v6, localAddrs(family))
				if err != nil {
					t.Fatalf("iptables-save output not understood: %v\n%s", err, numbered(save))
				}
				fromRendered, err := ipttrace.New(programmedSave(t, sc.cfg, sc.views...), v6, localAddrs(family))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range sc.flows {
					got, err := traceFlow(fromKernel, f)
					if err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
					want, err := traceFlow(fromRendered, f)
					if err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
					if g, w := rendertest.DescribeOutcomes(got), rendertest.DescribeOutcomes(want); g != w {
						t.Errorf("%s: kernel's rules give\n%s\nrendered rules give\n%s\ntrace:\n%s", f.name, g, w, got.TraceString())
					}
					if errs := checkFlow(f, got); errs != nil {
						t.Errorf("%s: %s\n%s", f.name, strings.Join(errs, "; "), got.TraceString())
					}
				}
			})
		}
	}
}
