package differential

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/test/lab"
)

// SeedDir holds the rules every --cleanup case starts from: what upstream wrote in
// iptables and nftables mode for one Service, plus rules that are not kube-proxy's.
const SeedDir = "testdata/cleanup"

// seed writes the seed rules of both modes into ns (a fresh private namespace), as
// a node that ran either mode (or switched between them) has them.
func seed(ctx context.Context, ns *lab.NS) error {
	for _, s := range []struct {
		cmd  string
		file string
	}{
		{lab.IPTablesCommand(v1.IPv4Protocol, "-restore"), "iptables.rules"},
		{lab.IPTablesCommand(v1.IPv6Protocol, "-restore"), "ip6tables.rules"},
		{"nft", "nftables.nft"},
	} {
		f, err := os.Open(filepath.Join(SeedDir, s.file))
		if err != nil {
			return err
		}
		args := []string{"-w", "5"}
		if s.cmd == "nft" {
			args = []string{"-f", "-"}
		}
		cmd := ns.Command(ctx, s.cmd, args...)
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			return fmt.Errorf("seeding %s with %s: %w: %s", ns.Name, s.file, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

var counters = regexp.MustCompile(` \[\d+:\d+\]`)

// rulesSnapshot is what ns holds: per iptables chain ("ip4 nat KUBE-SERVICES"), its
// declaration and rules in order; per nftables table ("nft table ip kube-proxy"),
// that it exists (the kube-proxy tables are removed whole or not at all).
func rulesSnapshot(ctx context.Context, ns *lab.NS) (map[string]string, error) {
	out := map[string]string{}
	add := func(key, part string) {
		if out[key] != "" {
			out[key] += " | "
		}
		out[key] += part
	}
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		text, err := ns.Run(ctx, lab.IPTablesCommand(fam, "-save"))
		if err != nil {
			return nil, err
		}
		prefix := map[v1.IPFamily]string{v1.IPv4Protocol: "ip4", v1.IPv6Protocol: "ip6"}[fam]
		table := ""
		for _, line := range strings.Split(text, "\n") {
			line = counters.ReplaceAllString(strings.TrimSpace(line), "")
			f := strings.Fields(line)
			switch {
			case line == "" || strings.HasPrefix(line, "#") || line == "COMMIT":
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":") && len(f) >= 2:
				add(prefix+" "+table+" "+f[0][1:], "chain (policy "+f[1]+")")
			case f[0] == "-A" && len(f) >= 2:
				add(prefix+" "+table+" "+f[1], strings.Join(f[2:], " "))
			default:
				add(prefix+" "+table+" (other)", line)
			}
		}
	}
	text, err := ns.Run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out["nft "+line] = "present"
		}
	}
	return out, nil
}

// checkIPTablesBackend verifies that the plain iptables commands, which upstream's
// binary runs, use the nft backend that the seed was written with (and that kproxy
// detects): otherwise the two would clean different tables.
func checkIPTablesBackend(ctx context.Context, ns *lab.NS) error {
	for _, name := range []string{"iptables", "ip6tables"} {
		out, err := ns.Run(ctx, name, "--version")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "nf_tables") {
			return fmt.Errorf("%s is %q, not the nft backend the cleanup seed is written with", name, strings.TrimSpace(out))
		}
	}
	return nil
}

// runCleanup runs bin for c in a fresh private namespace seeded with c's seed (the
// rules of every mode, or the ipvs mode's live state) and returns its result and
// what it left.
func runCleanup(ctx context.Context, l *lab.Lab, bin Binary, c *Case, role, dir string) (Result, map[string]string, error) {
	ns, err := l.NewScratchNamespace(ctx, role)
	if err != nil {
		return Result{}, nil, err
	}
	defer func() { _ = l.DeleteNamespace(context.WithoutCancel(ctx), ns) }()
	if err := checkIPTablesBackend(ctx, ns); err != nil {
		return Result{}, nil, err
	}
	seedFn := seed
	if c.Seed == SeedIPVS {
		seedFn = seedIPVS
	}
	if err := seedFn(ctx, ns); err != nil {
		return Result{}, nil, err
	}
	r, err := runOffline(ctx, ns, bin, c, dir)
	if err != nil {
		return r, nil, err
	}
	left, err := rulesSnapshot(ctx, ns)
	if err != nil || c.Seed != SeedIPVS {
		return r, left, err
	}
	// The ipvs mode's state beyond rules: virtual servers, ipsets, links.
	live, err := ipvsSnapshot(ctx, ns)
	for k, v := range live {
		left[k] = v
	}
	return r, left, err
}
