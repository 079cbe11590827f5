package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Syncer is a proxier for one IP family, as seen by the sync loop. Sync reports
// whether it sent anything to the kernel (see SyncFunc).
type Syncer interface {
	Sync(ctx context.Context) (wrote bool, err error)
}

// SyncerFunc adapts a function to Syncer.
type SyncerFunc func(ctx context.Context) (bool, error)

// Sync calls f.
func (f SyncerFunc) Sync(ctx context.Context) (bool, error) { return f(ctx) }

type familySyncer struct {
	family v1.IPFamily
	syncer Syncer
}

// Families fans one sync out to the proxier of each IP family; see the package
// documentation.
type Families struct {
	members []familySyncer
}

// NewFamilies returns a Families over the given proxiers; nil entries are skipped.
// Sync visits IPv4 before IPv6 and any other key after them, sorted.
func NewFamilies(syncers map[v1.IPFamily]Syncer) *Families {
	f := &Families{}
	order := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	for _, fam := range order {
		if s := syncers[fam]; s != nil {
			f.members = append(f.members, familySyncer{family: fam, syncer: s})
		}
	}
	var others []v1.IPFamily
	for fam, s := range syncers {
		if fam != v1.IPv4Protocol && fam != v1.IPv6Protocol && s != nil {
			others = append(others, fam)
		}
	}
	slices.Sort(others)
	for _, fam := range others {
		f.members = append(f.members, familySyncer{family: fam, syncer: syncers[fam]})
	}
	return f
}

// Sync syncs every family, even when an earlier one fails, and returns their errors
// joined, each wrapped as "<family>: <err>". It reports whether any family wrote.
func (f *Families) Sync(ctx context.Context) (bool, error) {
	var errs []error
	wrote := false
	for _, m := range f.members {
		w, err := m.syncer.Sync(ctx)
		wrote = wrote || w
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.family, err))
		}
	}
	return wrote, errors.Join(errs...)
}

// Families reports which IP families are synced, in sync order.
func (f *Families) Families() []v1.IPFamily {
	out := make([]v1.IPFamily, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m.family)
	}
	return out
}
