package iptables

import (
	"bytes"
	"context"

	v1 "k8s.io/api/core/v1"
)

// Table is an iptables table name.
type Table string

// Tables kproxy uses.
const (
	TableNAT    Table = "nat"
	TableFilter Table = "filter"
	TableMangle Table = "mangle"
)

// Chain is an iptables chain name.
type Chain string

// Built-in chains.
const (
	ChainPrerouting  Chain = "PREROUTING"
	ChainInput       Chain = "INPUT"
	ChainForward     Chain = "FORWARD"
	ChainOutput      Chain = "OUTPUT"
	ChainPostrouting Chain = "POSTROUTING"
)

// Interface is one IP family's iptables. Table and chain names are plain
// names; rule arguments are iptables arguments after "-t table -A chain",
// unquoted (one argument per element, spaces allowed).
type Interface interface {
	// Family reports which family this instance manages.
	Family() v1.IPFamily
	// Present reports whether this family's iptables is usable on this host
	// (upstream's check: listing nat POSTROUTING succeeds).
	Present(ctx context.Context) bool
	// Restore runs (ip6)iptables-restore --noflush --counters with the
	// bounded xtables-lock wait. data may hold several tables ("*nat ...
	// COMMIT\n*filter ... COMMIT\n"). A failure returns a *RestoreError
	// holding the command's output, which names the failing line.
	Restore(ctx context.Context, data []byte) error
	// SaveInto appends the iptables-save output of one table to buf; on
	// failure buf is left as it was.
	SaveInto(ctx context.Context, table Table, buf *bytes.Buffer) error
	// EnsureChain creates chain unless it exists, reporting whether it did.
	EnsureChain(ctx context.Context, table Table, chain Chain) (existed bool, err error)
	// ChainExists reports whether chain exists; an error means the check
	// itself failed (for example the xtables lock was not obtained).
	ChainExists(ctx context.Context, table Table, chain Chain) (bool, error)
	// EnsureRule inserts the rule at the top of chain (prepend) or appends
	// it, unless an identical rule is already there.
	EnsureRule(ctx context.Context, prepend bool, table Table, chain Chain, args ...string) (existed bool, err error)
	// DeleteRule deletes every copy of the rule; an absent rule or chain is
	// not an error.
	DeleteRule(ctx context.Context, table Table, chain Chain, args ...string) error
	// FlushChain removes every rule of chain.
	FlushChain(ctx context.Context, table Table, chain Chain) error
	// DeleteChain deletes an empty, unreferenced chain; an absent chain is
	// not an error.
	DeleteChain(ctx context.Context, table Table, chain Chain) error
}

// Backend is the kernel interface the iptables binaries talk to.
type Backend string

// Backends. BackendPlain runs the plain iptables binaries, whichever backend
// the host's alternatives (or a wrapper script) point them at.
const (
	BackendNFT    Backend = "nft"
	BackendLegacy Backend = "legacy"
	BackendPlain  Backend = "plain"
)
