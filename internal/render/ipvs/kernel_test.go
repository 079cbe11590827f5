package ipvs

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipset"
	ipt "github.com/kproxy/kproxy/internal/render/iptables"
	"github.com/kproxy/kproxy/internal/render/rendertest"
)

// TestKernelRules restores every case's rules with the real iptables-restore of
// each backend, in a private network namespace where the sets exist (created
// with the ipset tool, as the rules need them), ensures the jumps, and checks that
// iptables-save prints back exactly the rendered rules. A kernel without IPVS
// refuses "-m ipvs" (KUBE-IPVS-OUT-FILTER): those cases are skipped there.
func TestKernelRules(t *testing.T) {
	backends := map[v1.IPFamily][]string{
		v1.IPv4Protocol: rendertest.IptablesBackends(t, v1.IPv4Protocol),
		v1.IPv6Protocol: rendertest.IptablesBackends(t, v1.IPv6Protocol),
	}
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Skipf("needs the ipset binary: %v", err)
	}
	for _, tc := range renderCases() {
		cfg, vs := tc.build(t)
		d := Render(cfg, vs)
		for _, b := range backends[tc.family] {
			t.Run(b+"/"+tc.name, func(t *testing.T) {
				ns := rendertest.Netns(t, "ipvsr")
				createSets(t, ns, d.Sets)
				restoreRules(t, ns, b, tc.family, d)
				st := ipt.NewState(&d.Rules, nil)
				for _, table := range ipt.Tables() {
					save, err := rendertest.RunIn(ns, nil, rendertest.IptablesBinary(b, tc.family, "-save"), "-t", string(table))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(st.DumpTable(table), rendertest.KubeChains(save)); diff != "" {
						t.Errorf("iptables-save of %s differs from the rendered rules (-rendered +kernel):\n%s", table, diff)
					}
				}
			})
		}
	}
}

// restoreRules restores d's chains with the backend's iptables-restore
// --noflush, then inserts the jumps, as the proxier's first sync does. A kernel
// without IPVS refuses "-m ipvs" (KUBE-IPVS-OUT-FILTER): t is skipped there.
func restoreRules(t *testing.T, ns, backend string, family v1.IPFamily, d *Desired) {
	t.Helper()
	var buf bytes.Buffer
	d.WriteRules(&buf)
	restoreInput := buf.String()
	if out, err := rendertest.RunIn(ns, []byte(restoreInput), rendertest.IptablesBinary(backend, family, "-restore"),
		"-w", "5", "--noflush", "--counters"); err != nil {
		if strings.Contains(restoreInput, "-m ipvs") {
			t.Skipf("this kernel refuses -m ipvs (no IPVS): %s", out)
		}
		t.Fatalf("kernel refused the input: %v\n%s", err, rendertest.Numbered(restoreInput))
	}
	for _, j := range JumpRules() {
		args := append([]string{rendertest.IptablesBinary(backend, family, ""), "-w", "5", "-t", string(j.Table), "-I", j.Chain, "1"}, j.Args...)
		if _, err := rendertest.RunIn(ns, nil, args...); err != nil {
			t.Fatalf("jump: %v", err)
		}
	}
}

// createSets creates the sets in ns with the daemon's create lines
// (ipset.CreateLine, upstream's options), in one `ipset restore`: a process per
// set made this test the slowest of make vm-test under the VM's emulated CPU.
func createSets(t *testing.T, ns string, sets []ipset.Contents) {
	t.Helper()
	var script bytes.Buffer
	for _, c := range sets {
		script.WriteString(ipset.CreateLine(c.Set))
		script.WriteByte('\n')
	}
	if out, err := rendertest.RunIn(ns, script.Bytes(), "ipset", "restore"); err != nil {
		t.Fatalf("ipset restore: %v: %s\n%s", err, out, script.String())
	}
}
