package differential

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/internal/ipvs"
	"github.com/kproxy/kproxy/test/lab"
)

// IPVSSeedDir holds the ipvs mode's live state that the SeedIPVS cases start from:
// what upstream's ipvs mode wrote in the VM's node1 for the lab's Service (ipsets,
// kube-ipvs0 and its addresses, virtual and real servers, iptables rules), plus state
// of each kind that is not kube-proxy's.
const IPVSSeedDir = "testdata/cleanup/ipvs"

// seedIPVS writes the ipvs seed into ns, in the order the kernel needs: the sets
// before the iptables rules that match on them.
func seedIPVS(ctx context.Context, ns *lab.NS) error {
	restore := func(file, cmd string, args ...string) error {
		f, err := os.Open(filepath.Join(IPVSSeedDir, file))
		if err != nil {
			return err
		}
		defer f.Close()
		c := ns.Command(ctx, cmd, args...)
		c.Stdin = f
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("seeding %s with %s: %w: %s", ns.Name, file, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := restore("ipsets.restore", "ipset", "restore"); err != nil {
		return err
	}
	if err := restore("links.ip", "ip", "-batch", "-"); err != nil {
		return err
	}
	if err := seedVirtualServers(ns, filepath.Join(IPVSSeedDir, "virtual-servers.txt")); err != nil {
		return err
	}
	if err := restore("iptables.rules", lab.IPTablesCommand(v1.IPv4Protocol, "-restore"), "-w", "5"); err != nil {
		return err
	}
	return restore("ip6tables.rules", lab.IPTablesCommand(v1.IPv6Protocol, "-restore"), "-w", "5")
}

// nsIPVS is the IPVS table of ns (a namespace made by `ip netns add`).
func nsIPVS(ns *lab.NS) *ipvs.Netlink { return ipvs.New("/run/netns/" + ns.Name) }

// seedVirtualServers adds the virtual and real servers of path (ParseVirtualServers)
// to ns's IPVS table.
func seedVirtualServers(ns *lab.NS, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	vss, err := ParseVirtualServers(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	table := nsIPVS(ns)
	defer table.Close()
	for _, vs := range vss {
		if err := table.AddVirtualServer(vs.VirtualServer); err != nil {
			return fmt.Errorf("seeding %s: %w", ns.Name, err)
		}
		for _, rs := range vs.Real {
			if err := table.AddRealServer(vs.Key(), rs); err != nil {
				return fmt.Errorf("seeding %s: %w", ns.Name, err)
			}
		}
	}
	return nil
}

// ipvsSnapshot is ns's ipvs-related state, keyed as rulesSnapshot's: per virtual
// server ("ipvs TCP 10.96.0.10:80") its scheduler, flags, timeout and real servers;
// per ipset ("ipset KUBE-CLUSTER-IP") its type and sorted members; per link other
// than lo ("link kube-ipvs0") its kind and addresses.
func ipvsSnapshot(ctx context.Context, ns *lab.NS) (map[string]string, error) {
	out := map[string]string{}
	table := nsIPVS(ns)
	defer table.Close()
	vss, err := table.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("listing the virtual servers of %s: %w", ns.Name, err)
	}
	for _, vs := range vss {
		rss, err := table.RealServers(vs.Key())
		if err != nil {
			return nil, fmt.Errorf("listing the real servers of %s in %s: %w", vs.Key(), ns.Name, err)
		}
		parts := []string{fmt.Sprintf("scheduler %s flags %#x timeout %d", vs.Scheduler, uint32(vs.Flags), vs.Timeout)}
		for _, rs := range rss {
			parts = append(parts, fmt.Sprintf("real %s weight %d", rs.AddrPort(), rs.Weight))
		}
		sort.Strings(parts[1:])
		out["ipvs "+vs.Key().String()] = strings.Join(parts, " | ")
	}
	sets, err := ns.Run(ctx, "ipset", "save")
	if err != nil {
		return nil, fmt.Errorf("ipset save in %s: %w", ns.Name, err)
	}
	for k, v := range ParseIPSetSave(sets) {
		out[k] = v
	}
	links, err := ns.Run(ctx, "ip", "-j", "-d", "addr", "show")
	if err != nil {
		return nil, fmt.Errorf("listing the links of %s: %w", ns.Name, err)
	}
	ls, err := ParseLinks(links)
	if err != nil {
		return nil, fmt.Errorf("links of %s: %w", ns.Name, err)
	}
	for k, v := range ls {
		out[k] = v
	}
	return out, nil
}

// SeedVirtualServer is one virtual server of a seed with its real servers.
type SeedVirtualServer struct {
	ipvs.VirtualServer
	Real []ipvs.RealServer
}

// ParseVirtualServers reads virtual servers in ipvsadm-save's notation (the VM has
// no ipvsadm; the notation is the one operators know): "-A -t ADDR:PORT -s SCHED
// [-p SECONDS]" adds a virtual server (-t TCP, -u UDP, --sctp-service SCTP; IPv6
// addresses in brackets), "-a -t ADDR:PORT -r ADDR:PORT [-m] [-w WEIGHT]" a real
// server of it. Blank lines and lines starting with # are skipped.
func ParseVirtualServers(r io.Reader) ([]SeedVirtualServer, error) {
	var out []SeedVirtualServer
	index := map[ipvs.Key]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		var vs ipvs.VirtualServer
		var rs ipvs.RealServer
		var hasReal bool
		rs.Weight = 1
		for i := 1; i < len(f); i++ {
			arg := func() (string, error) {
				if i+1 >= len(f) {
					return "", fmt.Errorf("line %d: %s wants a value", n, f[i])
				}
				i++
				return f[i], nil
			}
			opt := f[i]
			var val string
			var err error
			if opt != "-m" {
				if val, err = arg(); err != nil {
					return nil, err
				}
			}
			switch opt {
			case "-t", "-u", "--sctp-service":
				vs.Protocol = map[string]v1.Protocol{"-t": v1.ProtocolTCP, "-u": v1.ProtocolUDP, "--sctp-service": v1.ProtocolSCTP}[opt]
				ap, perr := netip.ParseAddrPort(val)
				if perr != nil {
					return nil, fmt.Errorf("line %d: %w", n, perr)
				}
				vs.Address, vs.Port = ap.Addr(), ap.Port()
			case "-s":
				vs.Scheduler = val
			case "-p":
				t, perr := strconv.ParseUint(val, 10, 32)
				if perr != nil {
					return nil, fmt.Errorf("line %d: %w", n, perr)
				}
				vs.Flags |= ipvs.FlagPersistent
				vs.Timeout = uint32(t)
			case "-r":
				ap, perr := netip.ParseAddrPort(val)
				if perr != nil {
					return nil, fmt.Errorf("line %d: %w", n, perr)
				}
				rs.Address, rs.Port, hasReal = ap.Addr(), ap.Port(), true
			case "-w":
				if rs.Weight, err = strconv.Atoi(val); err != nil {
					return nil, fmt.Errorf("line %d: %w", n, err)
				}
			case "-m":
				// masquerading forwarding: the only method kube-proxy uses, IPVS's default
			default:
				return nil, fmt.Errorf("line %d: unknown option %s", n, opt)
			}
		}
		switch f[0] {
		case "-A":
			index[vs.Key()] = len(out)
			out = append(out, SeedVirtualServer{VirtualServer: vs})
		case "-a":
			i, ok := index[vs.Key()]
			if !ok || !hasReal {
				return nil, fmt.Errorf("line %d: a real server needs -r and a virtual server added before it", n)
			}
			out[i].Real = append(out[i].Real, rs)
		default:
			return nil, fmt.Errorf("line %d: want -A or -a, got %q", n, f[0])
		}
	}
	return out, sc.Err()
}

// ParseIPSetSave reads `ipset save` output into "ipset NAME" -> its create line's
// type and options (without initval, the hash seed the kernel picks at random when
// a restore gives none), then its members sorted (the kernel lists hash members in
// no stable order).
func ParseIPSetSave(text string) map[string]string {
	creates := map[string]string{}
	members := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "create":
			opts := f[2:]
			if i := slices.Index(opts, "initval"); i >= 0 && i+1 < len(opts) {
				opts = slices.Delete(slices.Clone(opts), i, i+2)
			}
			creates[f[1]] = strings.Join(opts, " ")
		case "add":
			members[f[1]] = append(members[f[1]], strings.Join(f[2:], " "))
		}
	}
	out := map[string]string{}
	for name, c := range creates {
		m := members[name]
		sort.Strings(m)
		out["ipset "+name] = strings.Join(append([]string{c}, m...), " | ")
	}
	return out
}

// ParseLinks reads `ip -j -d addr show` into "link NAME" -> its kind, state and
// sorted addresses, for every link but lo (which every namespace has).
func ParseLinks(text string) (map[string]string, error) {
	var links []struct {
		IfName   string `json:"ifname"`
		Flags    []string
		LinkInfo struct {
			InfoKind string `json:"info_kind"`
		} `json:"linkinfo"`
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(text), &links); err != nil {
		return nil, fmt.Errorf("parsing ip -j addr show: %w", err)
	}
	out := map[string]string{}
	for _, l := range links {
		if l.IfName == "lo" {
			continue
		}
		var addrs []string
		for _, a := range l.AddrInfo {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		}
		sort.Strings(addrs)
		up := "down"
		for _, f := range l.Flags {
			if f == "UP" {
				up = "up"
			}
		}
		out["link "+l.IfName] = strings.Join(append([]string{"kind " + l.LinkInfo.InfoKind + " " + up}, addrs...), " | ")
	}
	return out, nil
}
