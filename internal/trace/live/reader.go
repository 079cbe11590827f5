package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/kproxy/kproxy/internal/ipset"
	"github.com/kproxy/kproxy/internal/iptables"
	"github.com/kproxy/kproxy/internal/trace/ipvstrace"
)

// Reader reads what the kernel of this node holds.
type Reader interface {
	// NFTables returns the listing of the nftables table (family "ip" or "ip6").
	NFTables(ctx context.Context, family, table string) (string, error)
	// IPTablesSave returns iptables-save of the family's filter and nat tables,
	// and names the command that produced it.
	IPTablesSave(ctx context.Context, family v1.IPFamily) ([]byte, string, error)
	// IPTablesRecent returns the addresses of the family in each "-m recent"
	// list of the kernel (iptables mode's session affinity), by list name.
	IPTablesRecent(ctx context.Context, family v1.IPFamily) (map[string][]netip.Addr, error)
	// LocalAddresses returns the node's own addresses of the family.
	LocalAddresses(ctx context.Context, family v1.IPFamily) ([]netip.Addr, error)
	// IPSets returns every ipset (`ipset save`) with its type and entries.
	IPSets(ctx context.Context) ([]ipset.SavedSet, error)
	// IPVS returns the family's IPVS virtual servers with their real servers,
	// its persistence templates (session affinity's memory) and whether IPVS
	// keeps its packets in conntrack.
	IPVS(ctx context.Context, family v1.IPFamily) (ipvstrace.IPVS, error)
	// Bridged returns the bridges whose bridged packets the family's iptables
	// sees (br_netfilter), for -m physdev.
	Bridged(ctx context.Context, family v1.IPFamily) ([]string, error)
}

// Kernel reads this node's kernel (the network namespace the process runs in).
type Kernel struct {
	// Exec runs iptables-save; nil means the real one.
	Exec utilexec.Interface
}

var _ Reader = (*Kernel)(nil)

// NFTables implements Reader with `nft list table FAMILY TABLE`.
func (k *Kernel) NFTables(ctx context.Context, family, table string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nft", "list", "table", family, table)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "No such file or directory") {
			return "", fmt.Errorf("the kernel has no table %s %s (is the proxy running in nftables mode on this node?): %s", family, table, msg)
		}
		return "", fmt.Errorf("nft list table %s %s: %w: %s", family, table, err, msg)
	}
	return stdout.String(), nil
}

// IPTablesSave implements Reader with the iptables-save of the host's backend
// (detected as the proxy detects it).
func (k *Kernel) IPTablesSave(ctx context.Context, family v1.IPFamily) ([]byte, string, error) {
	ex := k.Exec
	if ex == nil {
		ex = utilexec.New()
	}
	backend := iptables.DetectBackend(ctx, ex)
	ipt := iptables.New(ex, family, backend)
	var buf bytes.Buffer
	for _, table := range []iptables.Table{iptables.TableFilter, iptables.TableNAT} {
		if err := ipt.SaveInto(ctx, table, &buf); err != nil {
			return nil, "", fmt.Errorf("reading the %s iptables rules: %w", family, err)
		}
	}
	name := "iptables-save"
	if family == v1.IPv6Protocol {
		name = "ip6tables-save"
	}
	return buf.Bytes(), fmt.Sprintf("%s -t filter, -t nat (%s backend)", name, backend), nil
}

// recentDir is where xt_recent lists its lists, for the reader's network
// namespace.
const recentDir = "/proc/net/xt_recent"

// IPTablesRecent implements Reader from /proc/net/xt_recent: one file per list,
// one line per address ("src=10.0.0.1 ttl: 64 last_seen: …"). Entries older than
// a rule's --seconds are still listed until reaped; they are taken as present.
func (k *Kernel) IPTablesRecent(_ context.Context, family v1.IPFamily) (map[string][]netip.Addr, error) {
	entries, err := os.ReadDir(recentDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // xt_recent not loaded: no list
	}
	if err != nil {
		return nil, fmt.Errorf("reading the iptables recent lists: %w", err)
	}
	out := map[string][]netip.Addr{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(recentDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading the iptables recent list %s: %w", e.Name(), err)
		}
		out[e.Name()] = parseRecent(string(b), family)
	}
	return out, nil
}

// parseRecent reads the addresses of family in an xt_recent list.
func parseRecent(text string, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, line := range strings.Split(text, "\n") {
		field, _, _ := strings.Cut(line, " ")
		s, ok := strings.CutPrefix(field, "src=")
		if !ok {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().Is4() == (family == v1.IPv4Protocol) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// LocalAddresses implements Reader over netlink: every address of every
// interface, loopback included.
func (k *Kernel) LocalAddresses(_ context.Context, family v1.IPFamily) ([]netip.Addr, error) {
	fam := netlink.FAMILY_V4
	if family == v1.IPv6Protocol {
		fam = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(nil, fam)
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}
