package nfttext

import (
	"fmt"
	"strconv"
)

// Token is one word of nft text. A quoted string is one token, its quotes removed
// and Quoted set, so `comment "jump x"` can never be read as a verdict.
type Token struct {
	Text   string
	Quoted bool
}

// AppendTokens splits nft text into tokens, appended to dst (callers reading many
// lines reuse one slice). Blanks separate tokens; "{", "}", "," and ";" are tokens
// of their own even when glued to a word ("{0", "a,b", "x}"), as nft's listings
// write them; ":" and "." are tokens only when they stand alone, since they also
// occur inside addresses ("10.0.0.1:80", "fd00::1"). Quoted strings are read as Go
// reads them (knftables writes them with %q; nft's listings need no escapes).
func AppendTokens(dst []Token, text string) ([]Token, error) {
	for i := 0; i < len(text); {
		switch c := text[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			q, err := strconv.QuotedPrefix(text[i:])
			if err != nil {
				return nil, fmt.Errorf("unterminated string at offset %d: %w", i, err)
			}
			s, err := strconv.Unquote(q)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string %s: %w", q, err)
			}
			dst = append(dst, Token{Text: s, Quoted: true})
			i += len(q)
		case '{', '}', ',', ';':
			dst = append(dst, Token{Text: text[i : i+1]})
			i++
		default:
			j := i
			for j < len(text) && !isSeparator(text[j]) {
				j++
			}
			dst = append(dst, Token{Text: text[i:j]})
			i = j
		}
	}
	return dst, nil
}

func isSeparator(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '{', '}', ',', ';':
		return true
	}
	return false
}

// cursor walks a token list for the parsers of this package.
type cursor struct {
	toks []Token
	pos  int
	// what names the text being parsed in errors at its end: "rule", "command".
	what string
}

func (c *cursor) done() bool { return c.pos >= len(c.toks) }

// peek returns the next unquoted word, or "" (at the end, or for a quoted string).
func (c *cursor) peek() string { return c.peekAt(0) }

func (c *cursor) peekAt(n int) string {
	if c.pos+n >= len(c.toks) || c.toks[c.pos+n].Quoted {
		return ""
	}
	return c.toks[c.pos+n].Text
}

// accept consumes the next word if it is one of want, and returns it.
func (c *cursor) accept(want ...string) (string, bool) {
	w := c.peek()
	for _, x := range want {
		if w == x && w != "" {
			c.pos++
			return w, true
		}
	}
	return "", false
}

func (c *cursor) expect(want ...string) (string, error) {
	if w, ok := c.accept(want...); ok {
		return w, nil
	}
	return "", c.errorf("expected %s", quoteAll(want))
}

// word consumes a token that is not punctuation, quoted or not.
func (c *cursor) word(what string) (string, error) {
	if c.done() {
		return "", c.errorf("expected %s", what)
	}
	t := c.toks[c.pos]
	if !t.Quoted && isPunct(t.Text) {
		return "", c.errorf("expected %s", what)
	}
	c.pos++
	return t.Text, nil
}

// name consumes a word naming an object (a table, chain, set or counter). Names
// are written bare (nft.Op's and nft.Rule's printers, knftables), so a quoted one
// is taken only if it reads back as itself bare: not empty, without blanks,
// quotes or the separators "{", "}", ",", ";".
func (c *cursor) name(what string) (string, error) {
	if !c.done() && !isBareWord(c.toks[c.pos].Text) {
		return "", c.errorf("expected %s", what)
	}
	return c.word(what)
}

// isBareWord: w is one unquoted token.
func isBareWord(w string) bool {
	if w == "" || isPunct(w) {
		return false
	}
	for i := range len(w) {
		if isSeparator(w[i]) {
			return false
		}
	}
	return true
}

func isPunct(w string) bool {
	switch w {
	case "{", "}", ",", ";", ":", ".":
		return true
	}
	return false
}

// errorf locates an error at the next token.
func (c *cursor) errorf(format string, args ...any) error {
	where := "at end of " + c.what
	if !c.done() {
		where = fmt.Sprintf("at %q (token %d)", c.toks[c.pos].Text, c.pos+1)
	}
	return fmt.Errorf("%s %s", fmt.Sprintf(format, args...), where)
}

func quoteAll(ws []string) string {
	s := ""
	for i, w := range ws {
		if i > 0 {
			s += " or "
		}
		s += strconv.Quote(w)
	}
	return s
}
