package nfttrace

import (
	"fmt"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft/nfttext"
)

// maxJumpDepth mirrors the kernel's jump stack limit (NFT_JUMP_STACK_SIZE is 16).
const maxJumpDepth = 16

// chainVerdict is the result of running a chain.
type chainVerdict int

const (
	vNone   chainVerdict = iota // fell off the end or returned
	vAccept                     // accepted (ends this base chain only)
	vDrop
	vReject
)

// ruleResult is what evaluating one rule tells its chain to do.
type ruleResult int

const (
	rNext   ruleResult = iota // go on with the next rule
	rReturn                   // return from the chain
	rAccept
	rDrop
	rReject
)

func (r *run) runChain(tbl tableRef, name string, depth int) (chainVerdict, error) {
	if depth > maxJumpDepth {
		return vNone, fmt.Errorf("%s: jump depth exceeds %d (loop?)", tbl.chainName(name), maxJumpDepth)
	}
	ch := tbl.t.Chains[name]
	if ch == nil {
		return vNone, fmt.Errorf("%s: no such chain", tbl.chainName(name))
	}
	for _, rule := range ch.Rules {
		pr, err := r.tr.parse(tbl, name, rule.Rule)
		if err != nil {
			return vNone, err
		}
		res, err := r.evalRule(tbl, name, pr, depth)
		if err != nil {
			return vNone, newRuleError(tbl, name, rule.Rule, err)
		}
		switch res {
		case rReturn:
			return vNone, nil
		case rAccept:
			return vAccept, nil
		case rDrop:
			return vDrop, nil
		case rReject:
			return vReject, nil
		}
	}
	return vNone, nil
}

// evalRule evaluates a rule's statements left to right.
func (r *run) evalRule(tbl tableRef, chain string, pr *parsedRule, depth int) (ruleResult, error) {
	noted := false
	// The rule is recorded when execution first gets past its matches, so a jump's
	// target rules appear after the rule that jumped.
	noteRule := func() {
		if !noted {
			noted = true
			r.note(fmt.Sprintf("  [%s] %s", chain, pr.text))
			r.out.Trace = append(r.out.Trace, r.pending...)
			r.pending = nil
		}
	}
	r.pending = nil
	for _, st := range pr.Stmts {
		switch st := st.(type) {
		case nfttext.Match:
			ok, err := r.evalMatch(tbl, st)
			if err != nil || !ok {
				return rNext, err
			}
		case nfttext.VMap:
			e, err := r.lookupMap(tbl, &st.MapRef, true)
			if err != nil || e == nil {
				return rNext, err
			}
			noteRule()
			r.note(fmt.Sprintf("    => %s", e.Text))
			return r.execVerdict(tbl, *e.Verdict, depth)
		case nfttext.Verdict:
			noteRule()
			return r.execVerdict(tbl, st, depth)
		case nfttext.Reject:
			noteRule()
			return rReject, nil
		case nfttext.MarkSet:
			noteRule()
			if st.From == nil {
				r.pkt.mark = st.Value
			} else {
				v, ok, err := r.evalSelector(*st.From)
				if err != nil || !ok {
					return rNext, err
				}
				r.pkt.mark = uint32(v.num)
			}
		case nfttext.NAT:
			noteRule()
			return r.execNAT(tbl, st)
		case nfttext.Masquerade:
			noteRule()
			if err := r.checkNATHook("masquerade", "postrouting"); err != nil {
				return rNext, err
			}
			r.out.Masquerade = true
			r.natDone["src"] = true
			r.pkt.ctStatus["snat"] = true
			return rAccept, nil
		case nfttext.Dynset:
			noteRule()
			if err := checkSetRef(tbl, st.Set, st.Key); err != nil {
				return rNext, err
			}
		case nfttext.Counter, nfttext.Log:
			noteRule()
		default:
			return rNext, fmt.Errorf("internal error: unhandled statement %T", st)
		}
	}
	noteRule() // a rule made only of matches that all matched
	return rNext, nil
}

func (r *run) execVerdict(tbl tableRef, v nfttext.Verdict, depth int) (ruleResult, error) {
	switch v.Kind {
	case "accept":
		return rAccept, nil
	case "drop":
		return rDrop, nil
	case "reject":
		return rReject, nil
	case "continue":
		return rNext, nil
	case "return":
		return rReturn, nil
	case "jump", "goto":
		cv, err := r.runChain(tbl, v.Chain, depth+1)
		if err != nil {
			return rNext, err
		}
		switch cv {
		case vAccept:
			return rAccept, nil
		case vDrop:
			return rDrop, nil
		case vReject:
			return rReject, nil
		}
		if v.Kind == "goto" {
			// goto does not come back: when the target finishes, control returns
			// to whoever called the current chain.
			return rReturn, nil
		}
		return rNext, nil
	}
	return rNext, fmt.Errorf("internal error: unknown verdict %q", v.Kind)
}

// checkNATHook fails loudly where nft would refuse to load the rule.
func (r *run) checkNATHook(what string, hooks ...string) error {
	if r.baseType != knftables.NATType {
		return fmt.Errorf("%s reached from a %s chain (needs a nat chain)", what, r.baseType)
	}
	for _, h := range hooks {
		if h == r.baseHook {
			return nil
		}
	}
	return fmt.Errorf("%s reached from hook %s (allowed: %s)", what, r.baseHook, strings.Join(hooks, ", "))
}

func (r *run) execNAT(tbl tableRef, st nfttext.NAT) (ruleResult, error) {
	var err error
	if st.Kind == "dnat" {
		err = r.checkNATHook("dnat", "prerouting", "output")
	} else {
		err = r.checkNATHook("snat", "postrouting", "input")
	}
	if err != nil {
		return rNext, err
	}
	words := st.To
	if st.Map != nil {
		e, err := r.lookupMap(tbl, st.Map, false)
		if err != nil || e == nil {
			return rNext, err // no element: the rule does not match
		}
		r.out.Trace = append(r.out.Trace, r.pending...)
		r.pending = nil
		r.note(fmt.Sprintf("    => %s", e.Text))
		words = e.Data
	}
	target, err := nfttext.ParseNATTarget(words, st.Family)
	if err != nil {
		return rNext, err
	}
	if target.Addr.Is6() != r.pkt.v6 {
		return rNext, fmt.Errorf("%s target %s is not of the packet's family", st.Kind, target)
	}
	if st.Kind == "dnat" {
		r.pkt.dst = target.Addr
		if target.HasPort {
			r.pkt.dport = uint64(target.Port)
		}
		r.out.DNAT = target.String()
		r.pkt.ctStatus["dnat"] = true
		r.natDone["dst"] = true
	} else {
		r.pkt.src = target.Addr
		if target.HasPort {
			r.pkt.sport = uint64(target.Port)
		}
		r.out.SNAT = target.String()
		r.pkt.ctStatus["snat"] = true
		r.natDone["src"] = true
	}
	return rAccept, nil
}
