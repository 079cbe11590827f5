package nfttext

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/kproxy/kproxy/internal/nft"
)

// Set types and elements of the commands: the words of "type K . K : D", "typeof
// EXPR . EXPR : EXPR . EXPR" and of element keys and values, read into the typed
// values of nft.Op (nft.SetType, nft.Elem).

// parseSetType reads the tokens after "type" or (typeof) "typeof".
func parseSetType(toks []Token, typeof bool) (*nft.SetType, error) {
	t := &nft.SetType{}
	if typeof {
		c := &cursor{toks: toks, what: "typeof"}
		var err error
		if t.KeyOf, err = typeofKeys(c); err != nil {
			return nil, err
		}
		if _, ok := c.accept(":"); ok {
			if t.DataOf, err = typeofKeys(c); err != nil {
				return nil, err
			}
		}
		if !c.done() {
			return nil, c.errorf("unexpected words after typeof")
		}
		return t, nil
	}
	into := &t.Key
	expectType := true
	for _, tok := range toks {
		switch w := tok.Text; {
		case expectType:
			d, ok := nft.DataTypeNamed(w)
			if !ok {
				return nil, fmt.Errorf("unsupported datatype %q", w)
			}
			*into = append(*into, d)
			expectType = false
		case w == ".":
			expectType = true
		case w == ":" && into == &t.Key:
			into, expectType = &t.Data, true
		default:
			return nil, fmt.Errorf("unexpected %q in type", w)
		}
	}
	if expectType {
		return nil, fmt.Errorf("bad type %q", joinTokens(toks))
	}
	return t, nil
}

// typeofKeys reads the expressions of one side of a typeof.
func typeofKeys(c *cursor) ([]nft.Key, error) {
	e, err := parseExpr(c)
	if err != nil {
		return nil, err
	}
	return lowerKeys(e)
}

// parseElem reads an element key or data value: fields separated by ".", each an
// address, a number, a protocol name or an interface name.
func parseElem(toks []Token) (nft.Elem, error) {
	var buf [48]byte
	b := nft.ElemBuf(buf[:0])
	for i, tok := range toks {
		w := tok.Text
		if i%2 == 1 {
			if w != "." || tok.Quoted {
				return nft.Elem{}, fmt.Errorf("expected \".\" between fields of %q", joinTokens(toks))
			}
			continue
		}
		if tok.Quoted {
			b = b.Ifname(w)
			continue
		}
		if a, err := netip.ParseAddr(w); err == nil {
			b = b.Addr(a)
			continue
		}
		if n, err := strconv.ParseUint(w, 0, 32); err == nil {
			b = b.Num(uint32(n))
			continue
		}
		if p, ok := nft.ProtoNamed(w); ok {
			b = b.Proto(p)
			continue
		}
		if w == "" || len(w) >= 16 || isPunct(w) {
			return nft.Elem{}, fmt.Errorf("bad element field %q", w)
		}
		b = b.Ifname(w)
	}
	if len(toks)%2 == 0 {
		return nft.Elem{}, fmt.Errorf("bad element %q", joinTokens(toks))
	}
	return b.Elem(), nil
}

// parseElemValue reads a map element's value: a verdict or data.
func parseElemValue(toks []Token) (nft.Elem, error) {
	if _, ok := verdictKinds[toks[0].Text]; ok && !toks[0].Quoted {
		v, err := parseVerdictWords(toks)
		if err != nil {
			return nft.Elem{}, err
		}
		tv, err := v.Lower()
		if err != nil {
			return nft.Elem{}, err
		}
		return nft.VerdictElem(tv), nil
	}
	return parseElem(toks)
}

// ParseElem reads the text of an element's key or value ("10.0.0.1 . tcp . 80",
// "goto chain") as CommandParser does.
func ParseElem(text string) (nft.Elem, error) {
	toks, err := AppendTokens(nil, text)
	if err != nil {
		return nft.Elem{}, err
	}
	if len(toks) == 0 {
		return nft.Elem{}, fmt.Errorf("empty element")
	}
	return parseElemValue(toks)
}
