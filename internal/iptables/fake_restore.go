package iptables

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxChainNameLen is the kernel's limit on chain names (XT_EXTENSION_MAXNAMELEN
// minus the NUL).
const maxChainNameLen = 28

var (
	errNoChain   = errors.New("No chain/target/match by that name")
	errNoRule    = errors.New("Bad rule (does a matching rule exist in that chain?)")
	errChainBusy = errors.New("Too many links")
	// errUnterminatedQuote is iptables-restore's message, which splitArgs (the
	// tokenizer of save.go, shared with the Fake) returns.
	errUnterminatedQuote = errors.New("Unterminated quote")
)

// standardTargets are the verdicts and extension targets a rule may jump to
// without a chain of that name.
var standardTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "RETURN": true, "QUEUE": true,
	"MARK": true, "CONNMARK": true, "MASQUERADE": true, "DNAT": true, "SNAT": true,
	"REDIRECT": true, "REJECT": true, "LOG": true, "NFLOG": true, "TRACE": true,
	"NOTRACK": true, "CT": true, "TPROXY": true, "TCPMSS": true, "CHECKSUM": true,
	"NFQUEUE": true, "CLASSIFY": true, "DSCP": true, "TOS": true, "TTL": true, "HL": true,
	"SET": true, "SECMARK": true, "CONNSECMARK": true, "NETMAP": true, "TEE": true,
	"AUDIT": true, "SYNPROXY": true, "IDLETIMER": true, "DNPT": true, "SNPT": true,
}

// apply interprets iptables-restore input (load: an iptables-save dump that
// adds to the state instead). Each section replaces its table at COMMIT; an
// error discards the open section only, like iptables-restore.
func (f *Fake) apply(data string, load bool) error {
	var (
		cur  *fakeTable
		name Table
		line int
	)
	fail := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		return &RestoreError{
			Command: f.binary("-restore"),
			Output:  fmt.Sprintf("%s: line %d failed: %s", f.binary("-restore"), line, msg),
			Line:    line,
			Err:     exitError(1),
		}
	}
	for _, raw := range strings.Split(data, "\n") {
		line++
		text := strings.TrimSpace(raw)
		switch {
		case text == "" || text[0] == '#':
		case text[0] == '*':
			if cur != nil {
				return fail("COMMIT expected before %q", text)
			}
			name = Table(strings.TrimSpace(text[1:]))
			t, err := f.table(name)
			if err != nil {
				return fail("%v", err)
			}
			cur = t.clone()
		case cur == nil:
			return fail("%q outside a table", text)
		case text == "COMMIT":
			f.tables[name] = cur
			cur = nil
		case text[0] == ':':
			if err := cur.declare(strings.Fields(text[1:]), load); err != nil {
				return fail("%v", err)
			}
		default:
			args, err := splitArgs(text)
			if err != nil {
				return fail("%v", err)
			}
			if err := cur.command(name, args, load); err != nil {
				return fail("%v", err)
			}
		}
	}
	if cur != nil {
		return fail("COMMIT expected at the end of table %s", name)
	}
	return nil
}

// declare handles ":CHAIN POLICY [packets:bytes]".
func (t *fakeTable) declare(fields []string, load bool) error {
	if len(fields) < 2 {
		return fmt.Errorf("bad chain declaration %q", strings.Join(fields, " "))
	}
	chain, policy := Chain(fields[0]), fields[1]
	c := t.chains[chain]
	switch {
	case c == nil && policy != "-":
		return fmt.Errorf("bad built-in chain name %s", chain)
	case c == nil:
		return t.newChain(chain)
	case c.policy == "-" && policy != "-":
		return fmt.Errorf("cannot set the policy of user chain %s", chain)
	case c.policy != "-":
		if policy != "-" {
			c.policy = policy
		}
	case !load:
		c.rules = nil // --noflush flushes only the user chains it declares
	}
	return nil
}

// command applies one rule or chain command of a restore section. When
// loading a dump, jump targets are not checked: a dump of a real host may
// use extension targets this fake does not know.
func (t *fakeTable) command(table Table, args []string, load bool) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "[") {
		args = args[1:] // "[packets:bytes]" counters
	}
	if len(args) < 2 {
		return fmt.Errorf("incomplete command %q", strings.Join(args, " "))
	}
	op, chain, rest := args[0], Chain(args[1]), args[2:]
	switch op {
	case "-A", "--append":
		if load {
			if t.chains[chain] == nil {
				return errNoChain
			}
			t.chains[chain].rules = append(t.chains[chain].rules, rest)
			return nil
		}
		return t.addRule(table, chain, -1, rest)
	case "-I", "--insert":
		pos := 1
		if len(rest) > 0 {
			if n, err := strconv.Atoi(rest[0]); err == nil {
				pos, rest = n, rest[1:]
			}
		}
		return t.addRule(table, chain, pos, rest)
	case "-D", "--delete":
		return t.deleteRule(chain, rest)
	case "-N", "--new-chain":
		if t.chains[chain] != nil {
			return errors.New("Chain already exists")
		}
		return t.newChain(chain)
	case "-F", "--flush":
		c := t.chains[chain]
		if c == nil {
			return errNoChain
		}
		c.rules = nil
		return nil
	case "-X", "--delete-chain":
		if t.chains[chain] == nil {
			return errNoChain
		}
		return t.deleteChain(chain)
	}
	return fmt.Errorf("unsupported command %q", op)
}

func (t *fakeTable) newChain(chain Chain) error {
	if len(chain) == 0 || len(chain) > maxChainNameLen || strings.HasPrefix(string(chain), "-") {
		return fmt.Errorf("Invalid chain name `%s' (%d chars max)", chain, maxChainNameLen)
	}
	if standardTargets[string(chain)] {
		return fmt.Errorf("chain name `%s' is a target name", chain)
	}
	t.chains[chain] = &fakeChain{policy: "-"}
	return nil
}

// addRule inserts spec at the 1-based position pos, or appends it (pos -1).
func (t *fakeTable) addRule(table Table, chain Chain, pos int, spec []string) error {
	c := t.chains[chain]
	if c == nil {
		return errNoChain
	}
	if target := jumpTarget(spec); target != "" {
		if table == TableNAT && target == "DROP" {
			return errors.New(`The "nat" table is not intended for filtering, the use of DROP is therefore inhibited.`)
		}
		if !standardTargets[target] && t.chains[Chain(target)] == nil {
			return fmt.Errorf("Couldn't load target `%s':No such file or directory", target)
		}
	}
	switch {
	case pos < 0:
		c.rules = append(c.rules, spec)
	case pos < 1 || pos > len(c.rules)+1:
		return errors.New("Index of insertion too big")
	default:
		c.rules = slices.Insert(c.rules, pos-1, spec)
	}
	return nil
}

// deleteRule deletes the first copy of spec, or the rule at a 1-based index.
func (t *fakeTable) deleteRule(chain Chain, spec []string) error {
	c := t.chains[chain]
	if c == nil {
		return errNoChain
	}
	if len(spec) == 1 {
		if n, err := strconv.Atoi(spec[0]); err == nil {
			if n < 1 || n > len(c.rules) {
				return errors.New("Index of deletion too big")
			}
			c.rules = slices.Delete(c.rules, n-1, n)
			return nil
		}
	}
	i := slices.IndexFunc(c.rules, func(r []string) bool { return slices.Equal(r, spec) })
	if i < 0 {
		return errNoRule
	}
	c.rules = slices.Delete(c.rules, i, i+1)
	return nil
}

func (t *fakeTable) deleteChain(chain Chain) error {
	c := t.chains[chain]
	if c.policy != "-" {
		return fmt.Errorf("cannot delete built-in chain %s", chain)
	}
	if len(c.rules) > 0 {
		return errors.New("Directory not empty")
	}
	for name, other := range t.chains {
		for _, r := range other.rules {
			if jumpTarget(r) == string(chain) {
				return fmt.Errorf("%w: %s is referenced from %s", errChainBusy, chain, name)
			}
		}
	}
	delete(t.chains, chain)
	return nil
}

// jumpTarget returns the chain or target a rule jumps or goes to.
func jumpTarget(spec []string) string {
	for i := 0; i+1 < len(spec); i++ {
		switch spec[i] {
		case "-j", "--jump", "-g", "--goto":
			return spec[i+1]
		}
	}
	return ""
}
