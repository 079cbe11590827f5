package nfttrace

import (
	"fmt"
	"strings"
)

// token is one lexical unit of nft rule text. Quoted strings keep their quotes so the
// parser can tell `"lo"` from a keyword; unquote strips them.
type token string

// tokenize splits nft rule text into tokens. Whitespace separates tokens; "{", "}" and
// "," are tokens of their own even when glued to a word ("{0", "a,b", "x}"), because
// nft's own listings glue them. ":" and "." are only tokens when they stand alone,
// since they also occur inside addresses ("10.0.0.1:80", "fd00::1").
func tokenize(text string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			end := strings.IndexByte(text[i+1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			toks = append(toks, token(text[i:i+end+2]))
			i += end + 2
		case c == '{' || c == '}' || c == ',':
			toks = append(toks, token(text[i:i+1]))
			i++
		default:
			j := i
			for j < len(text) && !strings.ContainsRune(" \t\n\r\"{},", rune(text[j])) {
				j++
			}
			toks = append(toks, token(text[i:j]))
			i = j
		}
	}
	return toks, nil
}

func unquote(t token) string {
	s := string(t)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// tokenStream is a cursor over tokens with helpers for the recursive-descent parser.
type tokenStream struct {
	toks []token
	pos  int
}

func (s *tokenStream) eof() bool { return s.pos >= len(s.toks) }

func (s *tokenStream) peek() token {
	if s.eof() {
		return ""
	}
	return s.toks[s.pos]
}

func (s *tokenStream) peekAt(n int) token {
	if s.pos+n >= len(s.toks) {
		return ""
	}
	return s.toks[s.pos+n]
}

func (s *tokenStream) next() token {
	t := s.peek()
	if !s.eof() {
		s.pos++
	}
	return t
}

// accept consumes the next token if it is one of want.
func (s *tokenStream) accept(want ...token) (token, bool) {
	t := s.peek()
	for _, w := range want {
		if t == w && !s.eof() {
			s.pos++
			return t, true
		}
	}
	return "", false
}

func (s *tokenStream) expect(want ...token) (token, error) {
	if t, ok := s.accept(want...); ok {
		return t, nil
	}
	return "", s.errorf("expected %s", joinTokens(want, " or "))
}

// word consumes a token that is not punctuation.
func (s *tokenStream) word(what string) (token, error) {
	t := s.peek()
	if s.eof() || t == "{" || t == "}" || t == "," || t == ":" || t == "." {
		return "", s.errorf("expected %s", what)
	}
	s.pos++
	return t, nil
}

func (s *tokenStream) errorf(format string, args ...any) error {
	where := "at end of rule"
	if !s.eof() {
		where = fmt.Sprintf("at %q (token %d)", s.peek(), s.pos+1)
	}
	return fmt.Errorf("%s %s", fmt.Sprintf(format, args...), where)
}

func joinTokens(ts []token, sep string) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = fmt.Sprintf("%q", string(t))
	}
	return strings.Join(ss, sep)
}
