package trace

import "fmt"

// MaxOutcomes bounds the exploration of random choices, so that a mistaken
// ruleset cannot make a trace run forever.
const MaxOutcomes = 4096

// Choices replays and records the random choices of one walk of a packet through
// the rules: Explore hands each walk the choices to replay, and the walk calls
// Choose at each random choice point (nft's numgen, iptables' statistic match).
type Choices struct {
	replay     []int
	made, alts []int
}

// Choose returns which of n alternatives to take at the next choice point: the
// one being replayed, or the first at a point not seen before.
func (c *Choices) Choose(n int) int {
	alt := 0
	if i := len(c.made); i < len(c.replay) {
		alt = c.replay[i]
	}
	c.made = append(c.made, alt)
	c.alts = append(c.alts, n)
	return alt
}

// Explore calls walk once for every combination of random choices the rules
// allow, each with fresh Choices, and aggregates the Outcomes, in natural order
// (the first alternative of every choice first). An error of walk ends it, as more
// than MaxOutcomes paths do.
func Explore(walk func(*Choices) (Outcome, error)) (*Result, error) {
	var outcomes []Outcome
	pending := [][]int{nil} // choice prefixes still to explore (a stack)
	for len(pending) > 0 {
		prefix := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		c := &Choices{replay: prefix}
		out, err := walk(c)
		if err != nil {
			return nil, err
		}
		outcomes = append(outcomes, out)
		if len(outcomes) > MaxOutcomes {
			return nil, fmt.Errorf("more than %d possible outcomes", MaxOutcomes)
		}
		// Push the untried alternatives of every new choice point, last first, so
		// that outcomes come out in natural order.
		var next [][]int
		for i := len(prefix); i < len(c.made); i++ {
			for alt := 1; alt < c.alts[i]; alt++ {
				next = append(next, append(append([]int{}, c.made[:i]...), alt))
			}
		}
		for i := len(next) - 1; i >= 0; i-- {
			pending = append(pending, next[i])
		}
	}
	return Aggregate(outcomes), nil
}
