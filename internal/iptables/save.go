package iptables

import (
	"errors"
	"fmt"
	"strings"
)

// Save is iptables-save output, parsed: the tables in the order printed.
type Save struct {
	Tables []SaveTable
}

// SaveTable is one "*table ... COMMIT" section.
type SaveTable struct {
	Name Table
	// Chains are the declared chains in order (built-in chains first, as
	// iptables-save prints them).
	Chains []SaveChain
	// Rules are the "-A" lines in order; each chain's rules keep their order.
	Rules []SaveRule
}

// SaveChain is a ":NAME POLICY [packets:bytes]" declaration.
type SaveChain struct {
	Name Chain
	// Policy is "ACCEPT" or "DROP" for a built-in chain, "-" for a user chain.
	Policy string
	// Line is the 1-based line number in the input.
	Line int
}

// SaveRule is one "[packets:bytes] -A CHAIN ..." line.
type SaveRule struct {
	Chain Chain
	// Args are the arguments after "-A CHAIN", unquoted (one element per
	// argument, spaces allowed), as iptables-restore splits them.
	Args []string
	// Text is the rule as printed after "-A CHAIN " (quotes kept).
	Text string
	// Line is the 1-based line number in the input.
	Line int
}

// Table returns the named table, or nil.
func (s *Save) Table(name Table) *SaveTable {
	for i := range s.Tables {
		if s.Tables[i].Name == name {
			return &s.Tables[i]
		}
	}
	return nil
}

// ParseSave parses iptables-save output (any number of tables; "#" comments,
// counters and "-c" style "[packets:bytes]" prefixes allowed). It is strict: a
// line it does not understand, a rule of an undeclared chain or a table without
// COMMIT is an error naming the line.
func ParseSave(data []byte) (*Save, error) {
	return parseSave(data, false)
}

// ChainsInSave returns the names of the chains declared in iptables-save output
// (":NAME POLICY [p:b]" lines), in order. The iptables proxier passes the nat
// table's chains to the renderer's WriteFull, which deletes the per-ServicePort
// chains no Service renders, and --cleanup deletes those of every proxier. It
// reads with ParseSave's parser, leniently: lines it does not understand are
// skipped, so one odd line of another program never hides kproxy's chains.
func ChainsInSave(data []byte) []Chain {
	s, _ := parseSave(data, true) // lenient parsing never fails
	var out []Chain
	for _, t := range s.Tables {
		for _, c := range t.Chains {
			out = append(out, c.Name)
		}
	}
	return out
}

// parseSave is the one reader of iptables-save output. lenient skips the lines
// it cannot parse (and accepts declarations and rules outside a "*table"
// section, in a table named "") instead of failing.
func parseSave(data []byte, lenient bool) (*Save, error) {
	s := &Save{}
	var cur *SaveTable
	declared := map[Chain]bool{}
	// One copy of the input: every line, rule text and argument is a substring of
	// it (the drift checks parse the kernel's tables every few seconds).
	rest := string(data)
	line := 0
	open := func(name Table) {
		s.Tables = append(s.Tables, SaveTable{Name: name})
		cur = &s.Tables[len(s.Tables)-1]
		declared = map[Chain]bool{}
	}
	for rest != "" {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		line++
		text = strings.TrimSpace(text)
		err := func() error {
			switch {
			case text == "" || text[0] == '#':
			case text[0] == '*':
				if cur != nil && !lenient {
					return errors.New("COMMIT expected before a new table")
				}
				name := Table(strings.TrimSpace(text[1:]))
				if name == "" {
					return errors.New("table name missing")
				}
				if s.Table(name) != nil && !lenient {
					return fmt.Errorf("table %s listed twice", name)
				}
				open(name)
			case text == "COMMIT":
				if cur == nil {
					return errors.New("COMMIT outside a table")
				}
				cur = nil
			case cur == nil && !lenient:
				return fmt.Errorf("%q outside a table", text)
			case text[0] == ':':
				fields := strings.Fields(text[1:])
				if len(fields) < 2 {
					return fmt.Errorf("bad chain declaration %q", text)
				}
				if cur == nil {
					open("")
				}
				name := Chain(fields[0])
				if declared[name] {
					return fmt.Errorf("chain %s declared twice", name)
				}
				declared[name] = true
				cur.Chains = append(cur.Chains, SaveChain{Name: name, Policy: fields[1], Line: line})
			default:
				r, err := parseRuleLine(text)
				if err != nil {
					return err
				}
				if cur == nil {
					open("")
				}
				if !declared[r.Chain] && !lenient {
					return fmt.Errorf("rule of undeclared chain %s", r.Chain)
				}
				r.Line = line
				cur.Rules = append(cur.Rules, r)
			}
			return nil
		}()
		if err != nil && !lenient {
			return nil, fmt.Errorf("iptables-save output line %d: %w", line, err)
		}
	}
	if cur != nil && !lenient {
		return nil, fmt.Errorf("iptables-save output: table %s has no COMMIT", cur.Name)
	}
	return s, nil
}

// parseRuleLine parses "[packets:bytes] -A CHAIN args...".
func parseRuleLine(text string) (SaveRule, error) {
	if strings.HasPrefix(text, "[") {
		_, rest, ok := strings.Cut(text, "]")
		if !ok {
			return SaveRule{}, fmt.Errorf("bad counters in %q", text)
		}
		text = strings.TrimSpace(rest)
	}
	rest, ok := strings.CutPrefix(text, "-A ")
	if !ok {
		return SaveRule{}, fmt.Errorf("not a rule (-A CHAIN ...): %q", text)
	}
	chain, body, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	if chain == "" {
		return SaveRule{}, fmt.Errorf("rule without chain: %q", text)
	}
	body = strings.TrimSpace(body)
	args, err := SplitArgs(body)
	if err != nil {
		return SaveRule{}, fmt.Errorf("%q: %w", text, err)
	}
	return SaveRule{Chain: Chain(chain), Args: args, Text: body}, nil
}

// SplitArgs splits a restore line into arguments as iptables-restore does:
// blanks separate arguments outside double quotes; inside them a backslash
// escapes the next character; a closing quote ends the argument. It reads bytes,
// as iptables-restore does, so text that is not UTF-8 comes back unchanged. An
// argument that is a run of the line's bytes (no escape, no quote inside it) is
// a substring of line, not a copy: drift checks split every rule of the kernel's
// tables and of the applied state, and copies were most of their allocations.
func SplitArgs(line string) ([]string, error) {
	var (
		out     = make([]string, 0, strings.Count(line, " ")+1)
		inQuote bool
		escaped bool
		// The argument so far is line[start:end] (start < 0: empty) until a byte
		// that does not follow on from it joins it; from then on it is spill.
		start   = -1
		end     int
		spill   []byte
		spilled bool
	)
	size := func() int {
		switch {
		case spilled:
			return len(spill)
		case start < 0:
			return 0
		}
		return end - start
	}
	keep := func(i int) {
		switch {
		case spilled:
			spill = append(spill, line[i])
		case start < 0:
			start, end = i, i+1
		case end == i:
			end++
		default:
			spill = append(append(spill[:0], line[start:end]...), line[i])
			spilled = true
		}
	}
	emit := func() {
		switch {
		case spilled:
			out = append(out, string(spill))
		case start < 0:
			out = append(out, "")
		default:
			out = append(out, line[start:end])
		}
		start, spilled = -1, false
	}
	for i := range len(line) {
		c := line[i]
		switch {
		case inQuote && escaped:
			keep(i)
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case inQuote && c == '"':
			inQuote = false
			emit()
		case inQuote:
			keep(i)
		case c == '"':
			inQuote = true
		case c == ' ' || c == '\t':
			if size() > 0 {
				emit()
			}
		default:
			keep(i)
		}
	}
	if inQuote {
		return nil, errUnterminatedQuote
	}
	if size() > 0 {
		emit()
	}
	return out, nil
}
