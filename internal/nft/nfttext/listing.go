package nfttext

import (
	"fmt"
	"strings"
)

// A listing is what `nft list table FAMILY NAME` (or `nft list ruleset`) prints:
// the kernel's own spelling of the objects a table holds, one statement per line,
// blocks in braces. ParseListing reads its structure with this package's lexer,
// and each rule with ParseRule's parser, so a rule read from the kernel and the
// same rule read from a transaction are one syntax tree.

// Listing is a parsed listing: its tables in order.
type Listing struct {
	Tables []ListedTable
}

// ListedTable is one "table FAMILY NAME { … }" block.
type ListedTable struct {
	Family   string // "ip", "ip6", "inet", …
	Name     string
	Comment  string
	Chains   []ListedChain
	Sets     []ListedSet // sets and maps (IsMap), in listing order
	Counters []string    // named counters
}

// ListedChain is one chain. Type, Hook, Priority and Policy are set for base
// chains: Priority as written ("dstnat", "-110", "dstnat - 10").
type ListedChain struct {
	Name     string
	Comment  string
	Type     string
	Hook     string
	Priority string
	Policy   string
	Rules    []ListedRule
}

// ListedRule is one rule: the text of its line and its syntax tree.
type ListedRule struct {
	Text string
	Rule *Rule
}

// ListedSet is one set or map: its properties as words, and its elements.
type ListedSet struct {
	Name  string
	IsMap bool
	// Type is the words after "type" or "typeof" (TypeOf).
	Type   string
	TypeOf bool
	Flags  []string
	// Elements in listing order.
	Elements []ListedElem
}

// ListedElem is one element of a set or map. Key holds one word per field of the
// concatenation (an address, a prefix, a range "a-b", a number, a protocol name);
// Value, in a map, one word per field of the data ("10.0.0.1", "80") or the
// verdict as one word ("goto chain"). Comment, Timeout and Expires are the
// element's own properties, when listed.
type ListedElem struct {
	Key     []string
	Value   []string
	Comment string
	Timeout string
	Expires string
}

// ParseListing reads a listing. It fails on anything it does not know, naming the
// line.
func ParseListing(text string) (*Listing, error) {
	p := &listingParser{lines: strings.Split(text, "\n")}
	l := &Listing{}
	for p.next() {
		toks := p.toks
		if len(toks) != 4 || toks[0].Text != "table" || toks[3].Text != "{" {
			return nil, p.errorf("expected \"table FAMILY NAME {\"")
		}
		t := ListedTable{Family: toks[1].Text, Name: toks[2].Text}
		if err := p.table(&t); err != nil {
			return nil, err
		}
		l.Tables = append(l.Tables, t)
	}
	return l, p.err
}

// listingParser reads a listing line by line; toks are the current line's tokens.
type listingParser struct {
	lines []string
	n     int // the current line, 1-based
	toks  []Token
	err   error
}

// next moves to the next non-blank line.
func (p *listingParser) next() bool {
	for p.err == nil && p.n < len(p.lines) {
		p.n++
		toks, err := AppendTokens(p.toks[:0], p.lines[p.n-1])
		if err != nil {
			p.err = fmt.Errorf("line %d: %w", p.n, err)
			return false
		}
		p.toks = toks
		if len(toks) > 0 {
			return true
		}
	}
	return false
}

func (p *listingParser) errorf(format string, args ...any) error {
	return fmt.Errorf("listing line %d %q: %s", p.n, strings.TrimSpace(p.lines[p.n-1]), fmt.Sprintf(format, args...))
}

// isClose is a line "}".
func (p *listingParser) isClose() bool { return len(p.toks) == 1 && p.toks[0].Text == "}" }

// blockHead is a line "KIND NAME {", returning NAME.
func (p *listingParser) blockHead(kind string) (string, bool) {
	t := p.toks
	if len(t) == 3 && !t[0].Quoted && t[0].Text == kind && t[2].Text == "{" {
		return t[1].Text, true
	}
	return "", false
}

func (p *listingParser) table(t *ListedTable) error {
	for p.next() {
		if p.isClose() {
			return nil
		}
		if w, ok := prop(p.toks, "comment", 2); ok {
			t.Comment = w[1]
			continue
		}
		if name, ok := p.blockHead("chain"); ok {
			c := ListedChain{Name: name}
			if err := p.chain(&c); err != nil {
				return err
			}
			t.Chains = append(t.Chains, c)
			continue
		}
		if name, ok := p.blockHead("set"); ok {
			s := ListedSet{Name: name}
			if err := p.set(&s); err != nil {
				return err
			}
			t.Sets = append(t.Sets, s)
			continue
		}
		if name, ok := p.blockHead("map"); ok {
			s := ListedSet{Name: name, IsMap: true}
			if err := p.set(&s); err != nil {
				return err
			}
			t.Sets = append(t.Sets, s)
			continue
		}
		if name, ok := p.blockHead("counter"); ok {
			if err := p.skipBlock(); err != nil {
				return err
			}
			t.Counters = append(t.Counters, name)
			continue
		}
		return p.errorf("unsupported table statement")
	}
	if p.err != nil {
		return p.err
	}
	return p.errorf("table not closed")
}

// skipBlock skips the body of a block whose properties say nothing a tracer needs
// (a named counter's values).
func (p *listingParser) skipBlock() error {
	for p.next() {
		if p.isClose() {
			return nil
		}
	}
	if p.err != nil {
		return p.err
	}
	return p.errorf("block not closed")
}

func (p *listingParser) chain(c *ListedChain) error {
	for p.next() {
		switch {
		case p.isClose():
			return nil
		case p.toks[0].Text == "type" && !p.toks[0].Quoted:
			if err := p.chainHook(c); err != nil {
				return err
			}
		case len(p.toks) == 2 && p.toks[0].Text == "comment" && !p.toks[0].Quoted && len(c.Rules) == 0:
			c.Comment = p.toks[1].Text
		default:
			r, err := parseRuleTokens(p.toks)
			if err != nil {
				return p.errorf("%v", err)
			}
			c.Rules = append(c.Rules, ListedRule{Text: strings.TrimSpace(p.lines[p.n-1]), Rule: r})
		}
	}
	if p.err != nil {
		return p.err
	}
	return p.errorf("chain not closed")
}

// chainHook reads "type T hook H [device D] priority P; [policy X;]".
func (p *listingParser) chainHook(c *ListedChain) error {
	for _, prop := range splitProps(p.toks) {
		if len(prop) == 0 {
			continue
		}
		switch w := words(prop); {
		case len(w) >= 6 && w[0] == "type" && w[2] == "hook" && w[4] == "priority":
			c.Type, c.Hook, c.Priority = w[1], w[3], strings.Join(w[5:], " ")
		case len(w) == 2 && w[0] == "policy":
			c.Policy = w[1]
		default:
			return p.errorf("unsupported chain property %q", strings.Join(w, " "))
		}
	}
	return nil
}

// splitProps splits tokens at ";".
func splitProps(toks []Token) [][]Token {
	var out [][]Token
	start := 0
	for i, t := range toks {
		if t.Text == ";" && !t.Quoted {
			out = append(out, toks[start:i])
			start = i + 1
		}
	}
	return append(out, toks[start:])
}

func words(toks []Token) []string {
	w := make([]string, len(toks))
	for i, t := range toks {
		w[i] = t.Text
	}
	return w
}

func (p *listingParser) set(s *ListedSet) error {
	for p.next() {
		if p.isClose() {
			return nil
		}
		t := p.toks
		switch first := t[0].Text; {
		case t[0].Quoted:
			return p.errorf("unsupported set property")
		case first == "type" || first == "typeof":
			s.TypeOf = first == "typeof"
			s.Type = joinTokens(t[1:])
		case first == "flags":
			for _, f := range t[1:] {
				if f.Text != "," {
					s.Flags = append(s.Flags, f.Text)
				}
			}
		case first == "elements":
			if err := p.elements(s); err != nil {
				return err
			}
		case first == "comment" || first == "size" || first == "timeout" || first == "gc-interval" ||
			first == "policy" || first == "auto-merge" || first == "counter":
			// Properties a tracer does not need.
		default:
			return p.errorf("unsupported set property")
		}
	}
	if p.err != nil {
		return p.err
	}
	return p.errorf("set not closed")
}

// elements reads "elements = { E, E, … }", which the kernel's listing wraps over
// several lines.
func (p *listingParser) elements(s *ListedSet) error {
	t := p.toks
	if len(t) < 3 || t[1].Text != "=" || t[2].Text != "{" {
		return p.errorf("expected \"elements = {\"")
	}
	toks := append([]Token(nil), t[3:]...)
	for !closes(toks) {
		if !p.next() {
			if p.err != nil {
				return p.err
			}
			return p.errorf("elements not closed")
		}
		toks = append(toks, p.toks...)
	}
	toks = toks[:len(toks)-1] // the closing "}"
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && (toks[i].Text != "," || toks[i].Quoted) {
			continue
		}
		if i > start {
			e, err := listedElem(toks[start:i], s.IsMap)
			if err != nil {
				return p.errorf("element %q of %s: %v", joinTokens(toks[start:i]), s.Name, err)
			}
			s.Elements = append(s.Elements, e)
		}
		start = i + 1
	}
	return nil
}

// closes reports whether toks end the element list (its last token is "}": the
// elements themselves hold no braces).
func closes(toks []Token) bool {
	return len(toks) > 0 && toks[len(toks)-1].Text == "}" && !toks[len(toks)-1].Quoted
}

// listedElem reads "K . K [timeout T] [expires E] [comment "C"] [: V . V]".
func listedElem(toks []Token, isMap bool) (ListedElem, error) {
	var e ListedElem
	c := &cursor{toks: toks, what: "element"}
	for {
		w, err := c.word("key field")
		if err != nil {
			return e, err
		}
		e.Key = append(e.Key, w)
		if _, ok := c.accept("."); !ok {
			break
		}
	}
	for {
		opt, ok := c.accept("timeout", "expires", "comment")
		if !ok {
			break
		}
		v, err := c.word(opt)
		if err != nil {
			return e, err
		}
		switch opt {
		case "timeout":
			e.Timeout = v
		case "expires":
			e.Expires = v
		default:
			e.Comment = v
		}
	}
	if _, ok := c.accept(":"); ok != isMap {
		if isMap {
			return e, c.errorf("expected \":\" and a value")
		}
		return e, c.errorf("unexpected words")
	}
	if isMap {
		// Fields separated by "."; a verdict ("goto chain") is one field.
		var field []string
		for !c.done() {
			if w := c.peek(); w == "." {
				c.pos++
				e.Value = append(e.Value, strings.Join(field, " "))
				field = nil
				continue
			}
			field = append(field, c.toks[c.pos].Text)
			c.pos++
		}
		if len(field) == 0 {
			return e, fmt.Errorf("empty map value")
		}
		e.Value = append(e.Value, strings.Join(field, " "))
	}
	return e, endOf(c)
}
