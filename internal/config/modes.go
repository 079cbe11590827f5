package config

// ProxyMode names a dataplane implementation ("mode" in the config file,
// --proxy-mode on the command line).
type ProxyMode string

// Proxy modes known to upstream kube-proxy.
const (
	ProxyModeIPTables    ProxyMode = "iptables"
	ProxyModeIPVS        ProxyMode = "ipvs"
	ProxyModeNFTables    ProxyMode = "nftables"
	ProxyModeKernelspace ProxyMode = "kernelspace"
)

// DefaultProxyMode is used when neither the file nor the flags choose a mode. It is
// upstream 1.37's default, iptables, so that an existing configuration with a blank
// mode (kubeadm's) means what it meant before the image was swapped: the same
// dataplane and the iptables block's periods and masqueradeAll. kproxy recommends
// nftables, and says so at start when the mode was defaulted (see the daemon).
const DefaultProxyMode = ProxyModeIPTables

// DefaultRunnableModes are the modes this build can run.
func DefaultRunnableModes() []ProxyMode {
	return []ProxyMode{ProxyModeNFTables, ProxyModeIPTables, ProxyModeIPVS}
}

// Set implements pflag.Value; the value is checked by validation, as upstream.
func (m *ProxyMode) Set(s string) error { *m = ProxyMode(s); return nil }

// String implements pflag.Value.
func (m *ProxyMode) String() string {
	if m == nil {
		return ""
	}
	return string(*m)
}

// Type implements pflag.Value.
func (m *ProxyMode) Type() string { return "ProxyMode" }

// LocalMode names how traffic from local pods is recognised.
type LocalMode string

// Local traffic detection modes.
const (
	LocalModeClusterCIDR         LocalMode = "ClusterCIDR"
	LocalModeNodeCIDR            LocalMode = "NodeCIDR"
	LocalModeBridgeInterface     LocalMode = "BridgeInterface"
	LocalModeInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// Set implements pflag.Value; the value is checked by validation, as upstream.
func (m *LocalMode) Set(s string) error { *m = LocalMode(s); return nil }

// String implements pflag.Value.
func (m *LocalMode) String() string {
	if m == nil {
		return ""
	}
	return string(*m)
}

// Type implements pflag.Value.
func (m *LocalMode) Type() string { return "LocalMode" }

// Keywords accepted in nodePortAddresses besides CIDRs.
const (
	NodePortAddressesPrimary   = "primary"
	NodePortAddressesLocalhost = "localhost"
	NodePortAddressesAll       = "all"
)
