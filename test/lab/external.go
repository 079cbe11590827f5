package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kproxy/kproxy/test/vm"
)

// The environment of a lab whose API server runs elsewhere (ExternalFromEnv): the
// e2e suites in the 6.1 VM (test/e2e/vmsuite) use the host's, over the VM's NIC.
const (
	// ExternalAPIServerEnv is the API server's URL, as node1 reaches it.
	ExternalAPIServerEnv = "KPROXY_LAB_APISERVER"
	// ExternalTokenEnv is a bearer token of system:masters on it.
	ExternalTokenEnv = "KPROXY_LAB_TOKEN"
	// ExternalUplinkEnv is "DEVICE=ADDRESS/LEN": the link that leads to it and
	// node1's address there.
	ExternalUplinkEnv = "KPROXY_LAB_UPLINK"
)

// UplinkName is the external control plane's uplink's name in node1.
const UplinkName = "uplink0"

// The test VM's link to a host lab's node1 (a tap there, the VM's eth0): a /30 of
// 198.18.0.0/15 (RFC 2544, reserved for network benchmarks), apart from every range
// the lab itself uses and never routed.
var (
	VMUplinkHost  = netip.MustParsePrefix("198.18.0.1/30")
	VMUplinkGuest = netip.MustParsePrefix("198.18.0.2/30")
)

// ExternalForVM is l's API server as a lab in the test VM uses it: over the VM's
// eth0, a tap in l's node1 at VMUplinkHost (vm.Network), with l's token.
func (l *Lab) ExternalForVM() *ExternalControlPlane {
	return &ExternalControlPlane{
		URL:     "https://" + netip.AddrPortFrom(VMUplinkHost.Addr(), APIServerPort).String(),
		Token:   l.Token,
		Uplink:  "eth0",
		Address: VMUplinkGuest,
	}
}

// ExternalControlPlane is an API server the lab uses instead of starting etcd and
// kube-apiserver in node1: node1 reaches it through Uplink, a link of the process's
// own network namespace that Start moves into node1 and gives Address. Moving a link
// out of the process's namespace is done only in the throw-away VM of test/vm (its
// eth0, a tap on the host): never in a host's root namespace.
type ExternalControlPlane struct {
	URL     string
	Token   string
	Uplink  string
	Address netip.Prefix
}

// ExternalFromEnv returns the external control plane of ExternalAPIServerEnv,
// ExternalTokenEnv and ExternalUplinkEnv, nil when ExternalAPIServerEnv is unset.
func ExternalFromEnv() (*ExternalControlPlane, error) {
	url := os.Getenv(ExternalAPIServerEnv)
	if url == "" {
		return nil, nil
	}
	dev, addr, ok := strings.Cut(os.Getenv(ExternalUplinkEnv), "=")
	if !ok || dev == "" {
		return nil, fmt.Errorf("%s=%q: want DEVICE=ADDRESS/LEN", ExternalUplinkEnv, os.Getenv(ExternalUplinkEnv))
	}
	prefix, err := netip.ParsePrefix(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ExternalUplinkEnv, err)
	}
	e := &ExternalControlPlane{URL: url, Token: os.Getenv(ExternalTokenEnv), Uplink: dev, Address: prefix}
	if e.Token == "" {
		return nil, fmt.Errorf("%s is set but %s is not", ExternalAPIServerEnv, ExternalTokenEnv)
	}
	return e, nil
}

// Env returns e as the environment ExternalFromEnv reads ("NAME=value").
func (e *ExternalControlPlane) Env() []string {
	return []string{
		ExternalAPIServerEnv + "=" + e.URL,
		ExternalTokenEnv + "=" + e.Token,
		ExternalUplinkEnv + "=" + e.Uplink + "=" + e.Address.String(),
	}
}

// useExternalControlPlane moves the uplink into node1, addresses it, and points the
// lab's client and kubeconfig at the external API server, once it answers /readyz.
func (l *Lab) useExternalControlPlane(ctx context.Context, t0 time.Time) error {
	e := l.Options.External
	if !vm.InVM() {
		return errors.New("an external control plane moves a link out of the process's network namespace: only in the test VM (test/vm)")
	}
	// node1 has an eth0 of its own: the uplink is renamed UplinkName on the way.
	for _, args := range [][]string{
		{"link", "set", "dev", e.Uplink, "down"},
		{"link", "set", "dev", e.Uplink, "name", UplinkName},
		{"link", "set", "dev", UplinkName, "netns", l.Node1.NS.Name},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("moving %s into %s as %s: ip %s: %w: %s", e.Uplink, l.Node1.NS.Name, UplinkName,
				strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	if err := l.Node1.NS.IPBatch(ctx, []string{
		"addr add " + e.Address.String() + " dev " + UplinkName,
		"link set dev " + UplinkName + " up",
	}); err != nil {
		return fmt.Errorf("uplink %s in node1: %w", e.Uplink, err)
	}
	l.Token = e.Token
	// l.APIServer stays nil: waitAPIServerReady then watches no process.
	return l.connect(ctx, t0)
}
