package nftables

import (
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/nft"
)

// Fragment is a plain description of part of the kproxy table: the chains it owns
// (with their rules), the sets/maps it owns, and the elements it puts into sets/maps
// (its own or shared ones). RenderBase and RenderService return Fragments with every
// list sorted, so that equal inputs give equal Fragments and output is deterministic.
// Fragments are never mutated after rendering; keep them to diff the next sync.
type Fragment struct {
	Chains     []Chain
	Containers []Container
	Elements   []Element
	// Counters are named counters (only the base fragment has any: the localhost
	// NodePort reject counters).
	Counters []Counter
}

// Counter is a named nftables counter owned by a fragment. Rules name it with
// "counter name \"<name>\"".
type Counter struct {
	Name string
}

// Chain is a chain owned by a fragment. Hook is nil for regular chains.
type Chain struct {
	Name    string
	Comment string
	Hook    *BaseChain
	Rules   []Rule
}

// BaseChain is the hook attachment of a base chain.
type BaseChain struct {
	Type     knftables.BaseChainType
	Hook     knftables.BaseChainHook
	Priority knftables.BaseChainPriority
}

// Rule is one rule, typed (see internal/nft): its statements and comment. Its text
// (nft.Rule.AppendText) is what follows "add rule <family> <table> <chain>".
type Rule = nft.Rule

// Container is a named set or map owned by a fragment.
type Container struct {
	Name  string
	IsMap bool
	// Type is the key (and map data) type, by datatypes ("ipv4_addr . inet_proto
	// . inet_service : verdict") or by expressions ("typeof ip daddr . tcp dport .
	// numgen random mod 1 : ...", for numgen keys, whose integer type nft cannot
	// name). Containers share the package's SetType values (setTypes).
	Type    *nft.SetType
	Comment string
	// Timeout, when non-zero, makes the set dynamic with a per-element timeout (used by
	// session affinity sets, updated from the packet path).
	Timeout time.Duration
}

// Element is one element of a named set (Value zero) or map. Key and Value are
// packed (nft.Elem): a State holds ~160,000 elements at 10,000 Services, so an
// Element is kept at 64 bytes (whether its container is a map is told by Value,
// not by a field of its own).
type Element struct {
	Container string
	Key       nft.Elem
	Value     nft.Elem
	Comment   string
}

// elementID identifies an element in the kernel: a map key holds one value at a time.
type elementID struct {
	container string
	key       nft.Elem
}

func (e *Element) id() elementID { return elementID{e.Container, e.Key} }

// Equal reports whether f and g describe the same objects. Fragments from
// RenderBase/RenderService are sorted, so equal inputs give Equal fragments.
func (f *Fragment) Equal(g *Fragment) bool {
	if f == nil || g == nil {
		return f == g
	}
	return slices.EqualFunc(f.Chains, g.Chains, func(a, b Chain) bool { return equalChain(&a, &b) }) &&
		slices.EqualFunc(f.Containers, g.Containers, equalContainer) && slices.Equal(f.Elements, g.Elements) &&
		slices.Equal(f.Counters, g.Counters)
}

func equalContainer(a, b Container) bool {
	return a.Name == b.Name && a.IsMap == b.IsMap && a.Comment == b.Comment && a.Timeout == b.Timeout &&
		(a.Type == b.Type || a.Type != nil && b.Type != nil && a.Type.Equal(b.Type))
}

func equalChain(a, b *Chain) bool {
	return a.Name == b.Name && a.Comment == b.Comment && equalHook(a.Hook, b.Hook) && slices.EqualFunc(a.Rules, b.Rules, func(x, y Rule) bool { return x.Equal(&y) })
}

func equalHook(a, b *BaseChain) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sortFragment puts every list of f in canonical order, each in an array of its
// length: a State keeps every fragment until the Service changes, and lists grown
// by appending hold up to twice their length (3 MB of a State at 10,000 Services).
func sortFragment(f *Fragment) {
	slices.SortFunc(f.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(f.Containers, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	f.Elements = sortElements(f.Elements)
	slices.SortFunc(f.Counters, func(a, b Counter) int { return strings.Compare(a.Name, b.Name) })
	f.Chains, f.Containers, f.Elements, f.Counters = exactSize(f.Chains), exactSize(f.Containers), exactSize(f.Elements), exactSize(f.Counters)
	for i := range f.Chains {
		f.Chains[i].Rules = exactSize(f.Chains[i].Rules)
	}
}

// sortElements sorts es in canonical order and drops duplicates, in place.
func sortElements(es []Element) []Element {
	slices.SortFunc(es, compareElements)
	return slices.CompactFunc(es, func(a, b Element) bool { return a == b })
}

// exactSize returns s in an array of its length (s itself when it already is).
func exactSize[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}

// compareElements orders elements by container, then key and value text, then
// comment. The comparisons run in turn, not as cmp.Or's arguments, which are all
// evaluated: printing both keys and both values to compare elements of different
// containers was 15% of the CPU of rendering and encoding a full sync.
func compareElements(a, b Element) int {
	if c := strings.Compare(a.Container, b.Container); c != 0 {
		return c
	}
	if c := nft.CompareText(a.Key, b.Key); c != 0 {
		return c
	}
	if c := nft.CompareText(a.Value, b.Value); c != 0 {
		return c
	}
	return strings.Compare(a.Comment, b.Comment)
}
