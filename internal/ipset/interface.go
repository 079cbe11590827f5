package ipset

import (
	"context"
	"errors"
)

// Interface is the boundary to the kernel's IP sets in one network namespace.
type Interface interface {
	// Version is the ipset tool's version as it prints it ("v7.19").
	Version(ctx context.Context) (string, error)
	// ListSets returns the names of every set, kproxy's or not, sorted.
	ListSets(ctx context.Context) ([]string, error)
	// Entries returns the entries of one set in `ipset save` notation, sorted;
	// the error wraps ErrNotFound when the set does not exist.
	Entries(ctx context.Context, name string) ([]string, error)
	// Save returns every set with its entries (sorted), in one call: the
	// current state that Plan takes.
	Save(ctx context.Context) (map[string][]string, error)
	// Restore runs an `ipset restore -exist` script, such as Plan writes.
	Restore(ctx context.Context, script []byte) error
	// Destroy destroys one set; a set that does not exist is not an error.
	Destroy(ctx context.Context, name string) error
}

// ErrNotFound is wrapped by Entries' error when the set does not exist.
var ErrNotFound = errors.New("set does not exist")

// Upstream's creation options (pkg/proxy/ipvs/ipset: setIPSetDefaults).
const (
	HashSize         = 1024
	MaxElem          = 65536
	DefaultPortRange = "0-65535"
)
