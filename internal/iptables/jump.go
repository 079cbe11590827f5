package iptables

import (
	"bytes"
	"context"
	"fmt"
)

// EnsureJump makes a built-in chain jump to one of a proxy mode's chains: it
// creates target in table unless it exists, then inserts the rule (args, ending
// in "-j target") at the top of chain unless an identical rule is there. It is
// one rule at a time because iptables-restore cannot add a rule to a built-in
// chain without flushing it (other software's rules are there too); the iptables
// and ipvs modes both call it for their render.JumpRules on full syncs, as
// upstream does.
func EnsureJump(ctx context.Context, ipt Interface, table Table, chain, target Chain, args []string) error {
	if _, err := ipt.EnsureChain(ctx, table, target); err != nil {
		return fmt.Errorf("ensuring chain %s in table %s: %w", target, table, err)
	}
	if _, err := ipt.EnsureRule(ctx, true, table, chain, args...); err != nil {
		return fmt.Errorf("ensuring the jump from %s to %s in table %s: %w", chain, target, table, err)
	}
	return nil
}

// SaveTables lists tables with iptables-save, one call each, and parses them:
// what the iptables and ipvs modes' drift comparisons read. A table the listing
// does not print is nil in the result.
func SaveTables(ctx context.Context, ipt Interface, tables ...Table) (map[Table]*SaveTable, error) {
	out := make(map[Table]*SaveTable, len(tables))
	var buf bytes.Buffer
	for _, table := range tables {
		buf.Reset()
		if err := ipt.SaveInto(ctx, table, &buf); err != nil {
			return nil, fmt.Errorf("listing the %s table: %w", table, err)
		}
		save, err := ParseSave(buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("reading the %s table: %w", table, err)
		}
		out[table] = save.Table(table)
	}
	return out, nil
}
