package differential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kproxy/kproxy/test/e2e/proxytest"
	"github.com/kproxy/kproxy/test/lab"
	"github.com/kproxy/kproxy/test/lab/labtest"
	"github.com/kproxy/kproxy/test/vm"
)

// One pod per node is enough: the lab's Service gives both proxies something to
// program, and fewer namespaces start faster.
var suite = &labtest.Suite{Options: lab.Options{Node1Pods: 1, Node2Pods: 1}}

func TestMain(m *testing.M) {
	// TestDifferentialInVM boots the test VM with this binary as its agent (test/vm).
	vm.RunAgentIfAgent()
	// In -short mode (make unit) suite.Main starts no lab and only the checks that
	// need none run.
	code := suite.Main(m)
	proxytest.RemoveBinary()
	os.Exit(code)
}

// UpstreamBinEnv overrides where the upstream binary is found.
const UpstreamBinEnv = "KPROXY_UPSTREAM_BIN"

var (
	binsOnce sync.Once
	bins     [2]Binary // upstream, then ours
	binsErr  error
)

// binaries returns the upstream binary and ours (built from this tree by proxytest,
// or $KPROXY_PROXY_BIN), or skips t with the reason (fails it under
// KPROXY_E2E_REQUIRED=1, but skips it in -short mode whatever that says).
func binaries(t *testing.T) (upstream, ours Binary) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the upstream binary and builds ours")
	}
	binsOnce.Do(func() {
		up := os.Getenv(UpstreamBinEnv)
		if up == "" {
			dir, err := lab.ResolveBinDir("")
			if err != nil {
				binsErr = err
				return
			}
			up = filepath.Join(dir, "kube-proxy-upstream")
		}
		if st, err := os.Stat(up); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			binsErr = fmt.Errorf("missing upstream binary %s (build it with hack/build-tools.sh or set %s)", up, UpstreamBinEnv)
			return
		}
		our, err := proxytest.Binary()
		if err != nil {
			binsErr = err
			return
		}
		bins = [2]Binary{{Name: Upstream, Path: up}, {Name: Ours, Path: our}}
	})
	if binsErr != nil {
		if labtest.Required() {
			t.Fatalf("binaries unavailable and %s=1: %v", labtest.RequiredEnv, binsErr)
		}
		t.Skip("binaries unavailable: " + binsErr.Error())
	}
	return bins[0], bins[1]
}

// loadInputs reads the corpus and the allow-list, failing t when either is malformed.
func loadInputs(t *testing.T) ([]*Case, []Allowance) {
	t.Helper()
	cases, err := LoadCorpus(CorpusDir)
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	allow, err := LoadAllowList(AllowListPath)
	if err != nil {
		t.Fatalf("allow-list: %v", err)
	}
	return cases, allow
}

// checkAspect records the differences of one aspect of one case in the ledger, logs
// the allowed ones and fails t on the others (then it returns true).
func checkAspect(t *testing.T, ledger *Ledger, name string, aspect Aspect, diffs []Difference) (failed bool) {
	t.Helper()
	unexplained, explained := ledger.Record(name, aspect, diffs)
	for _, e := range explained {
		t.Logf("allowed difference: %s", e)
	}
	if len(unexplained) > 0 {
		var msg string
		for _, d := range unexplained {
			msg += "\n  - " + d.String()
		}
		t.Errorf("%d difference(s) from upstream that %s does not list:%s", len(unexplained), AllowListPath, msg)
	}
	return len(unexplained) > 0
}

// checkNoKubeconfig guards offline runs: with kubeadm's kubeconfig present on this
// machine, an offline proxy would reach a real API server.
func checkNoKubeconfig() error {
	if _, err := os.Stat(KubeadmKubeconfig); err == nil {
		return fmt.Errorf("%s exists on this machine: offline runs would reach a real API server", KubeadmKubeconfig)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
