package differential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// CorpusDir holds one YAML file per case, named <case name>.yaml.
const CorpusDir = "testdata/corpus"

// Case is one input run through both binaries. Args and Config may use the
// placeholders of Expand: {{config}} (the path of the written Config), {{out}} (the
// path --write-config-to should write), {{kubeconfig}}, {{node}} and {{clusterCIDR}}.
type Case struct {
	// Name is the file's base name: lower case words joined by '-'.
	Name string `json:"name"`
	// About says what the case covers and why it matters to an operator.
	About string `json:"about"`
	// Args is the command line (after the program name), run without the lab's API
	// server: in a private namespace of the lab, with nothing that would let a proxy
	// get past creating its API client (see doc.go).
	Args []string `json:"args"`
	// Config, when set, is written to {{config}} (byte for byte: duplicate and unknown
	// fields are part of some inputs).
	Config string `json:"config,omitempty"`
	// Compare lists the offline aspects compared (AspectExit, ...).
	Compare []Aspect `json:"compare"`
	// Cleanup, when set, makes this a --cleanup case: the rules of every mode are
	// seeded into a fresh private namespace, each binary runs there with Args, and
	// what is left is compared.
	Cleanup bool `json:"cleanup,omitempty"`
	// Seed names the state a --cleanup case starts from: "" is SeedModes, the
	// iptables and nftables modes' rules; SeedIPVS is the ipvs mode's live state,
	// which needs a kernel with IPVS (so VM too).
	Seed string `json:"seed,omitempty"`
	// VM, when set, runs the case only in the test VM with Debian 12's kernel, which
	// has IPVS (TestDifferentialInVM, hack/vm-test.sh); everywhere else it is not run.
	VM bool `json:"vm,omitempty"`
	// Lab, when set, also starts each binary in turn in the lab's node1 against the
	// lab's API server.
	Lab *LabRun `json:"lab,omitempty"`
}

// The seeds of --cleanup cases (Case.Seed).
const (
	SeedModes = ""
	SeedIPVS  = "ipvs"
)

// LabRun is the part of a case that runs in the lab.
type LabRun struct {
	// Args is the command line; the config file is Case.Config with kubeadm's
	// kubeconfig path (KubeadmKubeconfig) pointing at the lab's kubeconfig.
	Args []string `json:"args"`
	// Compare lists the lab aspects compared (AspectOutcome, AspectConfigz, ...).
	Compare []Aspect `json:"compare"`
}

// Aspect names one thing compared between the two binaries.
type Aspect string

// Offline aspects.
const (
	AspectExit        Aspect = "exit"        // the exit status
	AspectStdout      Aspect = "stdout"      // standard output, verbatim
	AspectFlags       Aspect = "flags"       // the flag names --help lists
	AspectWriteConfig Aspect = "writeConfig" // the YAML --write-config-to wrote, structurally
	AspectErrors      Aspect = "errors"      // the kind of failure, its validation errors, strict-decoding warnings
	AspectErrorFormat Aspect = "errorFormat" // how the final error is printed (klog or plain)
	AspectCleanup     Aspect = "cleanup"     // the rules --cleanup leaves
)

// Lab aspects.
const (
	AspectOutcome   Aspect = "outcome"   // runs until the first sync, or exits with which status
	AspectConfigz   Aspect = "configz"   // what /configz serves, structurally
	AspectProxyMode Aspect = "proxyMode" // what /proxyMode serves
	AspectEvents    Aspect = "events"    // the Events written for the node
	AspectMetrics   Aspect = "metrics"   // every upstream metric family exists in ours alike
)

var offlineAspects = []Aspect{AspectExit, AspectStdout, AspectFlags, AspectWriteConfig, AspectErrors, AspectErrorFormat, AspectCleanup}

var labAspects = []Aspect{AspectOutcome, AspectConfigz, AspectProxyMode, AspectEvents, AspectMetrics}

// KubeadmKubeconfig is where kubeadm's DaemonSet mounts the proxy's kubeconfig. It does
// not exist on a test machine, so offline runs fail creating their API client (which
// keeps them from touching the kernel beyond the private namespace); lab runs get the
// lab's kubeconfig at that place in the config file.
const KubeadmKubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"

var (
	caseName        = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	kubeconfigField = regexp.MustCompile(`(?m)\bkubeconfig"?\s*:\s*([^\s,}]*)`)
)

// LoadCorpus reads every case of dir, sorted by name, and checks each is well formed.
func LoadCorpus(dir string) ([]*Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no cases in %s", dir)
	}
	var cases []*Case
	var errs []error
	for _, p := range paths {
		c, err := loadCase(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases, errors.Join(errs...)
}

func loadCase(path string) (*Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Case
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.check(strings.TrimSuffix(filepath.Base(path), ".yaml")); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

func (c *Case) check(base string) error {
	switch {
	case c.Name != base:
		return fmt.Errorf("name %q differs from the file's base name %q", c.Name, base)
	case !caseName.MatchString(c.Name):
		return fmt.Errorf("name %q: want lower-case words joined by '-'", c.Name)
	case strings.TrimSpace(c.About) == "":
		return errors.New("about is empty: say what the case covers")
	case len(c.Compare) == 0 && c.Lab == nil:
		return errors.New("compares nothing")
	}
	for _, a := range c.Compare {
		if !slices.Contains(offlineAspects, a) {
			return fmt.Errorf("compare: %q is not an offline aspect (%v)", a, offlineAspects)
		}
	}
	uses := func(args []string, p string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, p) })
	}
	if slices.Contains(c.Compare, AspectWriteConfig) && !uses(c.Args, "{{out}}") {
		return errors.New("compares writeConfig but no argument names {{out}}")
	}
	if slices.Contains(c.Compare, AspectCleanup) != c.Cleanup {
		return errors.New("cleanup: true and compare: [cleanup] go together")
	}
	switch {
	case c.Seed != SeedModes && c.Seed != SeedIPVS:
		return fmt.Errorf("seed %q: want %q or none", c.Seed, SeedIPVS)
	case c.Seed != SeedModes && !c.Cleanup:
		return errors.New("seed is for cleanup cases")
	case c.Seed == SeedIPVS && !c.VM:
		return errors.New("seed ipvs needs IPVS: set vm: true")
	}
	if c.Config != "" && !uses(c.Args, "{{config}}") && (c.Lab == nil || !uses(c.Lab.Args, "{{config}}")) {
		return errors.New("has a config but no argument names {{config}}")
	}
	// An offline run must never get an API client: it would go on to set sysctls
	// (some of them host-wide) and program rules. Only the lab's kubeconfig exists.
	// Offline, {{kubeconfig}} is KubeadmKubeconfig, which the runner checks is absent.
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--master") || strings.HasPrefix(a, "--kubeconfig") && a != "--kubeconfig={{kubeconfig}}" {
			return fmt.Errorf("offline argument %q could give the proxy an API server", a)
		}
	}
	for _, m := range kubeconfigField.FindAllStringSubmatch(c.Config, -1) {
		if v := strings.Trim(m[1], `"'`); v != "" && v != KubeadmKubeconfig && v != "{{kubeconfig}}" {
			return fmt.Errorf("config names kubeconfig %q: use %s or {{kubeconfig}}, which only the lab provides", v, KubeadmKubeconfig)
		}
	}
	if c.Lab != nil {
		if len(c.Lab.Compare) == 0 {
			return errors.New("lab: compares nothing")
		}
		for _, a := range c.Lab.Compare {
			if !slices.Contains(labAspects, a) {
				return fmt.Errorf("lab.compare: %q is not a lab aspect (%v)", a, labAspects)
			}
		}
		if uses(c.Lab.Args, "{{out}}") {
			return errors.New("lab: {{out}} has no meaning in the lab")
		}
	}
	return nil
}

// Placeholders are the values Expand substitutes.
type Placeholders struct {
	Config, Out, Kubeconfig, Node, ClusterCIDR string
}

// Expand substitutes the placeholders in s.
func (p Placeholders) Expand(s string) string {
	return strings.NewReplacer(
		"{{config}}", p.Config,
		"{{out}}", p.Out,
		"{{kubeconfig}}", p.Kubeconfig,
		"{{node}}", p.Node,
		"{{clusterCIDR}}", p.ClusterCIDR,
	).Replace(s)
}

// ExpandAll substitutes the placeholders in every argument.
func (p Placeholders) ExpandAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = p.Expand(a)
	}
	return out
}
