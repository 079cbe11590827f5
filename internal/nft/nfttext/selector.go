package nfttext

import (
	"fmt"
	"strconv"
)

// The selectors of the grammar: what a rule reads from the packet.

var exprStarts = map[string]bool{
	"ip": true, "ip6": true, "meta": true, "mark": true, "iifname": true, "oifname": true,
	"iif": true, "oif": true, "tcp": true, "udp": true, "sctp": true, "th": true,
	"fib": true, "ct": true, "numgen": true,
}

func startsExpr(w string) bool { return exprStarts[w] }

// ipFields are the types of the fields of "ip" and "ip6".
var ipFields = map[string]map[string]string{
	"ip":  {"saddr": "ipv4_addr", "daddr": "ipv4_addr", "protocol": "inet_proto"},
	"ip6": {"saddr": "ipv6_addr", "daddr": "ipv6_addr", "nexthdr": "inet_proto"},
}

// metaKeys are the types of the meta keys.
var metaKeys = map[string]string{
	"l4proto": "inet_proto", "mark": "mark", "iifname": "ifname", "oifname": "ifname",
	"iif": "ifname", "oif": "ifname", "nfproto": "nf_proto",
}

var bitOps = map[string]byte{"&": '&', "and": '&', "|": '|', "or": '|', "^": '^', "xor": '^'}

// parseExpr parses a selector or a concatenation of selectors, each optionally
// followed by bitwise operations with constants.
func parseExpr(c *cursor) (Expr, error) {
	var e Expr
	for {
		s, err := parseSelector(c)
		if err != nil {
			return e, err
		}
		for {
			op, ok := c.accept("&", "and", "|", "or", "^", "xor")
			if !ok {
				break
			}
			if s.Type != "mark" && s.Type != "integer" {
				return e, c.errorf("bitwise operation on %s is not supported", s.Name)
			}
			n, err := parseUint(c, "mark", 32)
			if err != nil {
				return e, err
			}
			s.Ops = append(s.Ops, BitOp{Op: bitOps[op], Value: uint32(n)})
		}
		e = append(e, s)
		if c.peek() == "." && startsExpr(c.peekAt(1)) {
			c.pos++
			continue
		}
		return e, nil
	}
}

func parseSelector(c *cursor) (Selector, error) {
	w := c.peek()
	c.pos++
	switch w {
	case "ip", "ip6":
		f := c.peek()
		t, ok := ipFields[w][f]
		if !ok {
			return Selector{}, c.errorf("unsupported %s field", w)
		}
		c.pos++
		return Selector{Name: w + " " + f, Type: t}, nil
	case "meta":
		return parseMetaKey(c, c.peek(), 1)
	case "mark", "iifname", "oifname", "iif", "oif":
		c.pos--
		return parseMetaKey(c, w, 1)
	case "tcp", "udp", "sctp", "th":
		f, err := c.expect("dport", "sport")
		if err != nil {
			return Selector{}, err
		}
		return Selector{Name: w + " " + f, Type: "inet_service"}, nil
	case "fib":
		a, err := c.expect("saddr", "daddr")
		if err != nil {
			return Selector{}, err
		}
		s := Selector{Name: "fib " + a + " type", Type: "fib_addrtype"}
		if c.peek() == "." && (c.peekAt(1) == "iif" || c.peekAt(1) == "oif") {
			s.Iface = c.peekAt(1)
			c.pos += 2
		}
		if _, err := c.expect("type"); err != nil {
			return Selector{}, err
		}
		return s, nil
	case "ct":
		f, err := c.expect("state", "status")
		if err != nil {
			return Selector{}, err
		}
		return Selector{Name: "ct " + f, Type: "ct_" + f}, nil
	case "numgen":
		return parseNumgen(c)
	}
	c.pos--
	return Selector{}, c.errorf("unsupported expression")
}

// parseMetaKey reads the meta key at the cursor (n words consumed on success).
func parseMetaKey(c *cursor, key string, n int) (Selector, error) {
	t, ok := metaKeys[key]
	if !ok {
		return Selector{}, c.errorf("unsupported meta key")
	}
	c.pos += n
	return Selector{Name: "meta " + key, Type: t}, nil
}

// parseNumgen parses "random mod N [offset M]" after "numgen".
func parseNumgen(c *cursor) (Selector, error) {
	if _, ok := c.accept("random"); !ok {
		return Selector{}, c.errorf("only \"numgen random\" is supported")
	}
	if _, err := c.expect("mod"); err != nil {
		return Selector{}, err
	}
	s := Selector{Name: "numgen random", Type: "integer"}
	mod, err := c.word("numgen modulus")
	if err != nil {
		return s, err
	}
	m, err := strconv.ParseUint(mod, 0, 32)
	if err != nil || m == 0 {
		return s, fmt.Errorf("bad numgen modulus %q", mod)
	}
	s.Mod = uint32(m)
	if _, ok := c.accept("offset"); ok {
		off, err := c.word("numgen offset")
		if err != nil {
			return s, err
		}
		o, err := strconv.ParseUint(off, 0, 32)
		if err != nil {
			return s, fmt.Errorf("bad numgen offset %q: %w", off, err)
		}
		s.Offset = uint32(o)
	}
	return s, nil
}
