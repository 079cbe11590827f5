package cleanup

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// NFTablesFactory returns a knftables.Interface bound to one family and
// table. knftables.New has this shape; tests pass a factory returning fakes.
type NFTablesFactory func(family knftables.Family, table string) (knftables.Interface, error)

// NewKnftables is the production NFTablesFactory.
func NewKnftables(family knftables.Family, table string) (knftables.Interface, error) {
	return knftables.New(family, table)
}

// cleanupNFTables deletes the "kube-proxy" table of the ip and ip6 families.
// A family where nft is unusable (no binary, no kernel support) is skipped,
// as upstream does.
func cleanupNFTables(ctx context.Context, newNFT NFTablesFactory) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, family := range nftablesFamilies {
		nft, err := newNFT(family, nftablesTable)
		if err != nil {
			logger.V(2).Info("nftables not usable; nothing to clean up", "family", family, "err", err)
			continue
		}
		tx := nft.NewTransaction()
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil && !knftables.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("nftables: deleting table %s %s: %w", family, nftablesTable, err))
		}
	}
	return errors.Join(errs...)
}
