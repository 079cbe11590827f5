// Package app is kproxy's command: the upstream-compatible kube-proxy command
// line (NewCommand) and the daemon it starts (run.go, written separately).
//
// Contract of command.go: NewCommand builds a cobra command with every flag of
// upstream kube-proxy 1.37 and no side effects. Executing it parses the flags,
// resolves them with the --config file into a validated *config.Config (see
// internal/config), applies the logging configuration, and then either prints
// the version, writes the configuration (--write-config-to) or calls the
// RunFunc. The command prints nothing for its errors; Execute reports them as
// component-base's cli.Run does (plain "Error: ..." before the flags were parsed,
// klog's "command failed" after) and returns the exit code.
//
// Contract of the daemon (Run): upstream's start-up sequence, with its checks and
// their failures (platform.go: conntrack settings, the families the mode's backend
// and the kernel support, nftables mode's kernel version), then every part under
// one errgroup. Warning Events about the configuration (KubeProxyDefaultMode) are
// recorded once the event broadcaster runs. The daemon serves the state API
// (internal/inspect) on the metrics address, unlisted in its index.
//
// Contract of tools.go: a first argument naming a tool (`explain`) runs that tool
// instead of the proxy (IsToolInvocation, ExecuteTool). Upstream's command takes no
// arguments, so this shadows no way of running the proxy. The tools read a running
// proxy's state API (--address, the metrics address by default) and print a table,
// JSON or YAML; their errors are one "Error: ..." line and exit code 1.
package app
