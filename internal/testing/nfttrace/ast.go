package nfttrace

// This file defines the parsed form of a rule: a list of statements, evaluated left
// to right; a failing match statement ends the rule.

// parsedRule is a rule after tokenizing and parsing.
type parsedRule struct {
	text  string
	stmts []stmt
}

type stmt interface{ isStmt() }

// component is one selector of an expression, e.g. "ip daddr" or "meta mark & 0x4000".
type component struct {
	sel    string // canonical selector name, e.g. "ip saddr", "meta mark", "numgen"
	kind   kind
	mod    uint64 // numgen: "mod N"
	offset uint64 // numgen: "offset M"
	bitops []bitop
}

type bitop struct {
	op  byte // '&', '|' or '^'
	val uint64
}

// expr is a selector or a concatenation of selectors ("a . b . c").
type expr struct {
	parts []component
}

func (e expr) kinds() []kind {
	ks := make([]kind, len(e.parts))
	for i, p := range e.parts {
		ks[i] = p.kind
	}
	return ks
}

// matchStmt is "EXPR [==|!=] RHS": RHS is either a named set or a list of
// alternatives (a literal, a comma list, or an anonymous set).
type matchStmt struct {
	lhs     expr
	negate  bool
	setName string      // "@name" without the "@"
	anon    [][]pattern // alternatives, each one pattern per lhs part
}

// mapEntry is one element of an anonymous or named map.
type mapEntry struct {
	key     []pattern
	verdict *verdictStmt // for verdict maps
	data    []string     // for data maps (e.g. "10.0.0.1", "80")
	text    string       // for the trace
}

// mapLookup is "EXPR vmap MAP" or "EXPR map MAP".
type mapLookup struct {
	key     expr
	name    string // named map, or "" for anonymous
	anon    []mapEntry
	verdict bool
}

// vmapStmt looks the key up in a verdict map and executes the verdict found; no
// element means the rule does not match.
type vmapStmt struct{ lookup mapLookup }

// verdictStmt is accept, drop, reject, jump, goto, return or continue.
type verdictStmt struct {
	verdict string
	chain   string // jump/goto
}

// markSetStmt is "meta mark set VALUE"; VALUE is either an expression over the mark or
// a literal.
type markSetStmt struct {
	value   *expr
	literal uint64
}

// natStmt is dnat or snat, to a literal target or to the result of a map lookup.
type natStmt struct {
	kind    string // "dnat" or "snat"
	family  string // "ip", "ip6" or "" (from "dnat ip to ...")
	literal []string
	lookup  *mapLookup
}

// masqueradeStmt is "masquerade [flags]".
type masqueradeStmt struct{}

// updateStmt is "update @set { EXPR }": parsed and checked, but a no-op (see doc.go).
type updateStmt struct {
	set string
	key expr
}

// noopStmt is counter, log or comment.
type noopStmt struct{ what string }

func (matchStmt) isStmt()      {}
func (vmapStmt) isStmt()       {}
func (verdictStmt) isStmt()    {}
func (markSetStmt) isStmt()    {}
func (natStmt) isStmt()        {}
func (masqueradeStmt) isStmt() {}
func (updateStmt) isStmt()     {}
func (noopStmt) isStmt()       {}
