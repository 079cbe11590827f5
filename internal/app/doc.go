// Package app is kproxy's command: the upstream-compatible kube-proxy command
// line (NewCommand) and the daemon it starts (run.go, written separately).
//
// Contract of command.go: NewCommand builds a cobra command with every flag of
// upstream kube-proxy 1.37 and no side effects. Executing it parses the flags,
// resolves them with the --config file into a validated *config.Config (see
// internal/config), applies the logging configuration, and then either prints
// the version, writes the configuration (--write-config-to) or calls the
// RunFunc. Errors are returned from Execute (the command prints nothing for
// them); main prints them and exits 1.
package app
