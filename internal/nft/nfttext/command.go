package nfttext

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kproxy/kproxy/internal/nft"
)

// Command is one command of a knftables transaction: the typed operation and the
// table it operates on.
type Command struct {
	Family nft.Family
	Table  string
	Op     nft.Op
}

// CommandParser reads the commands of knftables transactions (tx.String(): one
// command per line, in the format of knftables' objects.go writeOperation), reusing
// its token buffer from line to line. Its zero value is ready to use.
type CommandParser struct {
	toks []Token
}

// Parse reads one command line: add, create, delete and flush of the table,
// chains, sets, maps and counters; add of rules (lowered, see Lower); add, create
// and delete of elements (keys and values read into nft.Elem, set types into
// nft.SetType: see element.go).
func (p *CommandParser) Parse(line string) (Command, error) {
	toks, err := AppendTokens(p.toks[:0], line)
	if err != nil {
		return Command{}, err
	}
	p.toks = toks
	c := &cursor{toks: toks, what: "command"}
	verb, err := c.expect("add", "create", "delete", "flush")
	if err != nil {
		return Command{}, err
	}
	kind, err := c.expect("table", "chain", "rule", "set", "map", "element", "counter")
	if err != nil {
		return Command{}, err
	}
	var cmd Command
	switch fam, _ := c.accept("ip", "ip6"); fam {
	case "ip":
		cmd.Family = nft.IPv4
	case "ip6":
		cmd.Family = nft.IPv6
	default:
		return Command{}, c.errorf("unsupported family")
	}
	if cmd.Table, err = c.name("table name"); err != nil {
		return Command{}, err
	}
	op := &cmd.Op
	op.Create = verb == "create"
	op.IsMap = kind == "map"
	if kind != "table" && kind != "rule" {
		if op.Name, err = c.name(kind + " name"); err != nil {
			return Command{}, err
		}
		if op.Name == "handle" {
			return Command{}, fmt.Errorf("%ss by handle are not supported", kind)
		}
	}
	if err := objectCmd(c, verb, kind, cmd.Family, op); err != nil {
		return Command{}, err
	}
	return cmd, nil
}

// deleteFlush are the operations of "delete|flush OBJECT [NAME]", which say
// nothing more (0: not supported).
var deleteFlush = map[string][2]nft.OpKind{
	"table": {nft.DeleteTable, nft.FlushTable}, "chain": {nft.DeleteChain, nft.FlushChain},
	"set": {nft.DeleteSet, nft.FlushSet}, "map": {nft.DeleteSet, nft.FlushSet}, "counter": {nft.DeleteCounter, 0},
}

// objectCmd reads the rest of a command after the object's name.
func objectCmd(c *cursor, verb, kind string, f nft.Family, op *nft.Op) error {
	if kinds, ok := deleteFlush[kind]; ok && (verb == "delete" || verb == "flush") {
		if op.Kind = kinds[0]; verb == "flush" {
			op.Kind = kinds[1]
		}
		if op.Kind == 0 {
			return fmt.Errorf("%s %s is not supported", verb, kind)
		}
		return endOf(c)
	}
	switch kind {
	case "table":
		op.Kind = nft.AddTable
		return readBody(c, "table", func(p []Token) bool {
			w, ok := prop(p, "comment", 2)
			if ok {
				op.Comment = w[1]
			}
			return ok
		})
	case "chain":
		return chainCmd(c, op)
	case "rule":
		return ruleCmd(c, verb, f, op)
	case "set", "map":
		return setCmd(c, op)
	case "element":
		return elementCmd(c, verb, op)
	}
	op.Kind = nft.AddCounter
	return readBody(c, "counter", func(p []Token) bool {
		w, ok := prop(p, "packets", 4)
		if !ok || w[2] != "bytes" {
			return false
		}
		n, err1 := parseU64(w[1])
		m, err2 := parseU64(w[3])
		op.Packets, op.Bytes = n, m
		return err1 == nil && err2 == nil
	})
}

// readBody reads the body of an object, each property by read (false: not
// supported).
func readBody(c *cursor, what string, read func(p []Token) bool) error {
	props, err := body(c)
	if err != nil {
		return err
	}
	for _, p := range props {
		if !read(p) {
			return fmt.Errorf("unsupported %s property %q", what, joinTokens(p))
		}
	}
	return nil
}

// body reads "{ k v ; k v ; }" into its properties, each a list of tokens.
func body(c *cursor) ([][]Token, error) {
	if c.done() {
		return nil, nil
	}
	if _, err := c.expect("{"); err != nil {
		return nil, err
	}
	var out [][]Token
	start := c.pos
	for ; !c.done(); c.pos++ {
		switch c.peek() {
		case ";", "}":
			if c.pos > start {
				out = append(out, c.toks[start:c.pos])
			}
			start = c.pos + 1
			if c.peek() == "}" {
				c.pos++
				if !c.done() {
					return nil, c.errorf("unexpected words after }")
				}
				return out, nil
			}
		}
	}
	return nil, c.errorf("unterminated { }")
}

// prop returns the words of a property if its first is name and it has n words.
func prop(p []Token, name string, n int) ([]string, bool) {
	if len(p) != n || p[0].Quoted || p[0].Text != name {
		return nil, false
	}
	w := make([]string, n)
	for i, t := range p {
		w[i] = t.Text
	}
	return w, true
}

func endOf(c *cursor) error {
	if !c.done() {
		return c.errorf("unexpected words")
	}
	return nil
}

func chainCmd(c *cursor, op *nft.Op) error {
	op.Kind = nft.AddChain
	var policy string
	err := readBody(c, "chain", func(p []Token) bool {
		if w, ok := prop(p, "type", 6); ok && w[2] == "hook" && w[4] == "priority" {
			op.Hook = &nft.Hook{Type: w[1], Hook: w[3], Priority: w[5]}
		} else if w, ok := prop(p, "policy", 2); ok {
			policy = w[1]
		} else if w, ok := prop(p, "comment", 2); ok {
			op.Comment = w[1]
		} else {
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if policy != "" {
		if op.Hook == nil {
			return fmt.Errorf("policy on a regular chain")
		}
		op.Hook.Policy = policy
	}
	return nil
}

func ruleCmd(c *cursor, verb string, f nft.Family, op *nft.Op) error {
	if verb != "add" {
		return fmt.Errorf("%s rule is not supported", verb)
	}
	op.Kind = nft.AddRule
	var err error
	if op.Name, err = c.name("chain name"); err != nil {
		return err
	}
	if w, ok := c.accept("index", "handle", "position"); ok {
		return fmt.Errorf("rules by %s are not supported", w)
	}
	r, err := parseRuleTokens(c.toks[c.pos:])
	if err != nil {
		return err
	}
	op.Rule, err = Lower(r, f)
	return err
}

var setFlags = map[string]nft.SetFlags{
	"constant": nft.SetConstant, "interval": nft.SetInterval, "dynamic": nft.SetDynamic, "timeout": nft.SetTimeout,
}

func setCmd(c *cursor, op *nft.Op) error {
	op.Kind = nft.AddSet
	props, err := body(c)
	if err != nil {
		return err
	}
	for _, p := range props {
		switch w := joinTokens(p); {
		case p[0].Text == "type" || p[0].Text == "typeof":
			t, err := parseSetType(p[1:], p[0].Text == "typeof")
			if err != nil {
				return err
			}
			op.Type = t
		case strings.HasPrefix(w, "flags "):
			for _, t := range p[1:] {
				if t.Text == "," {
					continue
				}
				f, ok := setFlags[t.Text]
				if !ok {
					return fmt.Errorf("unsupported set flag %q", t.Text)
				}
				op.Flags |= f
			}
		default:
			if err := setProperty(op, p); err != nil {
				return err
			}
		}
	}
	if op.Type == nil {
		// nft refuses a set without a key type too; nft.Op's printer and encoder
		// need one.
		return fmt.Errorf("a set or map without type or typeof is not supported")
	}
	if op.Timeout > 0 {
		if op.Flags&(nft.SetDynamic|nft.SetTimeout) != nft.SetDynamic|nft.SetTimeout {
			return fmt.Errorf("a timeout without flags dynamic,timeout is not supported")
		}
		op.Flags &^= nft.SetDynamic | nft.SetTimeout
	}
	return nil
}

// setProperty reads the one-value properties of a set.
func setProperty(op *nft.Op, p []Token) error {
	if w, ok := prop(p, "comment", 2); ok {
		op.Comment = w[1]
		return nil
	}
	if _, ok := prop(p, "auto-merge", 1); ok {
		op.AutoMerge = true
		return nil
	}
	if len(p) != 2 {
		return fmt.Errorf("unsupported set property %q", joinTokens(p))
	}
	v := p[1].Text
	switch p[0].Text {
	case "timeout", "gc-interval":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("bad %s %q", p[0].Text, v)
		}
		if p[0].Text == "timeout" {
			op.Timeout = d
		} else {
			op.GCInterval = d
		}
	case "size":
		n, err := parseU32(v)
		if err != nil || n == 0 {
			return fmt.Errorf("bad size %q", v)
		}
		op.Size = n
	case "policy":
		op.Policy = v
	default:
		return fmt.Errorf("unsupported set property %q", joinTokens(p))
	}
	return nil
}

// elementCmd reads "{ KEY [comment "C"] [: VALUE] }".
func elementCmd(c *cursor, verb string, op *nft.Op) error {
	switch verb {
	case "flush":
		return fmt.Errorf("flush element is not supported")
	case "delete":
		op.Kind = nft.DeleteElement
	default:
		op.Kind = nft.AddElement
	}
	if _, err := c.expect("{"); err != nil {
		return err
	}
	start := c.pos
	for !c.done() {
		if w := c.peek(); w == "comment" || w == ":" || w == "}" {
			break
		}
		c.pos++
	}
	key, err := parseElem(c.toks[start:c.pos])
	if err != nil {
		return err
	}
	op.Key = key
	if _, ok := c.accept("comment"); ok {
		s, err := c.word("comment")
		if err != nil {
			return err
		}
		op.Comment = s
	}
	if _, ok := c.accept(":"); ok {
		start := c.pos
		for !c.done() && c.peek() != "}" {
			c.pos++
		}
		if start == c.pos {
			return c.errorf("expected a value")
		}
		if op.Value, err = parseElemValue(c.toks[start:c.pos]); err != nil {
			return err
		}
	}
	if _, err := c.expect("}"); err != nil {
		return err
	}
	if op.Key.IsZero() {
		return fmt.Errorf("element without key")
	}
	if op.Kind == nft.DeleteElement && (!op.Value.IsZero() || op.Comment != "") {
		return fmt.Errorf("delete element with a value or comment")
	}
	return endOf(c)
}

func parseU64(w string) (uint64, error) {
	n, err := strconv.ParseUint(w, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q: %w", w, err)
	}
	return n, nil
}
