package nfttrace

import (
	"fmt"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
)

// parsedRule is a rule's text and its syntax tree.
type parsedRule struct {
	text string
	*nfttext.Rule
}

// checkRule checks what the parser leaves to its readers: every literal parses as
// a value of its selector's type, nat targets are addresses of the statement's
// family, and no statement follows a terminal one, as nft checks ("Statement after
// terminal statement has no effect").
func checkRule(r *nfttext.Rule) error {
	terminal := false
	for _, st := range r.Stmts {
		if terminal {
			return fmt.Errorf("statement after terminal statement")
		}
		var err error
		switch st := st.(type) {
		case nfttext.Match:
			err = checkKeys(st.Left, st.Elems)
		case nfttext.VMap:
			terminal = true
			err = checkMapKeys(&st.MapRef)
		case nfttext.Verdict, nfttext.Reject, nfttext.Masquerade:
			terminal = true
		case nfttext.NAT:
			terminal = true
			if st.Map != nil {
				err = checkMapKeys(st.Map)
			} else {
				_, err = nfttext.ParseNATTarget(st.To, st.Family)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkKeys(key nfttext.Expr, keys [][]string) error {
	ks, err := exprKinds(key)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := parseKey(ks, k); err != nil {
			return err
		}
	}
	return nil
}

func checkMapKeys(m *nfttext.MapRef) error {
	keys := make([][]string, len(m.Elems))
	for i, e := range m.Elems {
		keys[i] = e.Key
	}
	return checkKeys(m.Key, keys)
}

func checkSetRef(tbl tableRef, name string, key nfttext.Expr) error {
	_, err := setKeys(tbl, name, key)
	return err
}

// validateRuleRefs checks that the sets and maps a rule uses exist and that their
// elements parse as the rule's lookup types.
func validateRuleRefs(tbl tableRef, chain string, pr *parsedRule) error {
	for _, st := range pr.Stmts {
		var err error
		switch st := st.(type) {
		case nfttext.Match:
			if st.Set != "" {
				err = checkSetRef(tbl, st.Set, st.Left)
			}
		case nfttext.Dynset:
			err = checkSetRef(tbl, st.Set, st.Key)
		case nfttext.Verdict:
			err = checkChainRef(tbl, st)
		case nfttext.VMap:
			var entries []nfttext.MapElem
			entries, err = mapEntries(tbl, &st.MapRef, true)
			for _, e := range entries {
				if err == nil {
					err = checkChainRef(tbl, *e.Verdict)
				}
			}
		case nfttext.NAT:
			if st.Map != nil {
				var entries []nfttext.MapElem
				entries, err = mapEntries(tbl, st.Map, false)
				for _, e := range entries {
					if err == nil {
						_, err = nfttext.ParseNATTarget(e.Data, st.Family)
					}
				}
			}
		}
		if err != nil {
			return newRuleError(tbl, chain, pr.text, err)
		}
	}
	return nil
}

func checkChainRef(tbl tableRef, v nfttext.Verdict) error {
	if v.Chain != "" && tbl.t.Chains[v.Chain] == nil {
		return fmt.Errorf("%s to unknown chain %q", v.Kind, v.Chain)
	}
	return nil
}
