package nftables

import (
	"testing"
)

// The claim index stays exact when element IDs collide: with every ID hashing alike,
// each ID still sees only its own claims, in claim order.
func TestClaimIndexCollisions(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(elementID) uint64
	}{
		{"real hash", nil},
		{"every ID collides", func(elementID) uint64 { return 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClaimIndex(0)
			c.hashOf = tc.hash
			a := &Fragment{Elements: []Element{
				{Container: "service-ips", Key: elem("10.0.0.1 . tcp . 80"), Value: elem("goto a")},
				{Container: "cluster-ips", Key: elem("10.0.0.1")},
			}}
			b := &Fragment{Elements: []Element{
				{Container: "service-ips", Key: elem("10.0.0.1 . tcp . 80"), Value: elem("goto b")},
				{Container: "service-ips", Key: elem("10.0.0.2 . tcp . 80"), Value: elem("goto b2")},
			}}
			for _, f := range []*Fragment{a, b} {
				for i := range f.Elements {
					c.add(f, i)
				}
			}
			if c.len() != 4 {
				t.Fatalf("len = %d, want 4", c.len())
			}
			shared := a.Elements[0].id()
			if got := c.get(shared); len(got) != 2 || got[0] != refTo(a, 0) || got[1] != refTo(b, 0) {
				t.Errorf("claims on %v = %v, want a's then b's", shared, got)
			}
			if c.only(a, 0) || c.only(b, 0) {
				t.Errorf("only() = true for a shared element")
			}
			// Without collisions, an element nobody else claims is answered by only()
			// (with them, callers fall back to get, as fullOps does).
			if tc.hash == nil && (!c.only(a, 1) || !c.only(b, 1)) {
				t.Errorf("only() = false for elements nobody else claims")
			}
			if got := c.get(a.Elements[1].id()); len(got) != 1 || got[0] != refTo(a, 1) {
				t.Errorf("claims on %v = %v, want a's only", a.Elements[1].id(), got)
			}

			// a lets go of the shared element: b's value is next; the others stay.
			c.set(shared, []claimRef{refTo(b, 0)})
			if got := c.get(shared); len(got) != 1 || got[0].claim().value != elem("goto b") {
				t.Errorf("after set, claims on %v = %v, want b's", shared, got)
			}
			if got := c.get(b.Elements[1].id()); len(got) != 1 || got[0] != refTo(b, 1) {
				t.Errorf("set on one ID changed another's claims: %v", got)
			}
			c.set(shared, nil)
			c.set(a.Elements[1].id(), nil)
			c.set(b.Elements[1].id(), nil)
			if c.len() != 0 || len(c.first) != 0 || len(c.more) != 0 {
				t.Errorf("index not empty after every claim was dropped: %d claims, %d/%d entries", c.len(), len(c.first), len(c.more))
			}
			if got := c.get(shared); got != nil {
				t.Errorf("claims on a dropped ID: %v", got)
			}
		})
	}
}
