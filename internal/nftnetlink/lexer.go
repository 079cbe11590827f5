package nftnetlink

import (
	"fmt"
	"strconv"
	"strings"
)

// token is one word of an nft command. Quoted strings keep their quotes off and set
// quoted, so `comment "jump x"` can never be read as a verdict.
type token struct {
	text   string
	quoted bool
}

// appendTokens splits one knftables command line into words, appended to toks.
// knftables and the renderer separate every operator with spaces ("{ a : b }",
// "a . b", " , "), so splitting on blanks is exact; the one exception, element lists
// written "a, b", is handled by splitting a trailing comma into its own token. Quoted
// strings are Go-quoted (knftables writes them with %q) and are unquoted with strconv.
// The translator reuses one slice for every line of a transaction (no token outlives
// its command), which saves the ~100 MB of short-lived slices a full sync of 10,000
// Services would otherwise allocate and the collections they cost.
func appendTokens(toks []token, line string) ([]token, error) {
	for i := 0; i < len(line); {
		c := line[i]
		if c == ' ' || c == '\t' {
			i++
			continue
		}
		if c == '"' {
			q, err := strconv.QuotedPrefix(line[i:])
			if err != nil {
				return nil, fmt.Errorf("bad quoted string at %q: %w", line[i:], err)
			}
			s, err := strconv.Unquote(q)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string %s: %w", q, err)
			}
			toks = append(toks, token{text: s, quoted: true})
			i += len(q)
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		w := line[i:j]
		if len(w) > 1 && strings.HasSuffix(w, ",") {
			toks = append(toks, token{text: w[:len(w)-1]}, token{text: ","})
		} else {
			toks = append(toks, token{text: w})
		}
		i = j
	}
	return toks, nil
}

// cursor walks a token list.
type cursor struct {
	toks []token
	pos  int
}

func (c *cursor) done() bool { return c.pos >= len(c.toks) }

// peek returns the next unquoted word, or "" (also for a quoted string).
func (c *cursor) peek() string {
	if c.done() || c.toks[c.pos].quoted {
		return ""
	}
	return c.toks[c.pos].text
}

func (c *cursor) peekAt(n int) string {
	if c.pos+n >= len(c.toks) || c.toks[c.pos+n].quoted {
		return ""
	}
	return c.toks[c.pos+n].text
}

func (c *cursor) next() string {
	w := c.peek()
	if !c.done() {
		c.pos++
	}
	return w
}

// accept consumes the next word if it equals w.
func (c *cursor) accept(w string) bool {
	if c.peek() == w && w != "" {
		c.pos++
		return true
	}
	return false
}

func (c *cursor) expect(w string) error {
	if !c.accept(w) {
		return fmt.Errorf("expected %q, found %q", w, c.describeNext())
	}
	return nil
}

// word consumes and returns the next unquoted word, failing at the end.
func (c *cursor) word(what string) (string, error) {
	if c.done() || c.toks[c.pos].quoted {
		return "", fmt.Errorf("expected %s, found %q", what, c.describeNext())
	}
	return c.next(), nil
}

// quotedOrWord consumes a quoted string or a bare word.
func (c *cursor) quotedOrWord(what string) (string, error) {
	if c.done() {
		return "", fmt.Errorf("expected %s at end of input", what)
	}
	t := c.toks[c.pos]
	c.pos++
	return t.text, nil
}

func (c *cursor) describeNext() string {
	if c.done() {
		return "end of input"
	}
	return c.toks[c.pos].text
}
