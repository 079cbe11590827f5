package bench

import "testing"

func TestModeSizes(t *testing.T) {
	c := Config{ChangeSize: 10000, ModeSizes: map[string][]int{ModeIPTables: {1000, 2000}}}
	for _, tc := range []struct {
		mode string
		size int
		want bool
	}{
		{ModeNFTables, 10000, true},
		{ModeNFTables, 30000, true},
		{ModeIPTables, 0, true}, // the dataplane baseline
		{ModeIPTables, 1000, true},
		{ModeIPTables, 10000, false},
	} {
		if got := c.measures(tc.mode, tc.size); got != tc.want {
			t.Errorf("measures(%s, %d) = %t, want %t", tc.mode, tc.size, got, tc.want)
		}
	}
	if got := c.changeSize(ModeNFTables); got != 10000 {
		t.Errorf("nftables change size = %d, want 10000", got)
	}
	if got := c.changeSize(ModeIPTables); got != 2000 {
		t.Errorf("iptables change size = %d, want the largest allowed, 2000", got)
	}
	c.ModeSizes[ModeIPTables] = []int{1000, 10000}
	if got := c.changeSize(ModeIPTables); got != 10000 {
		t.Errorf("iptables change size = %d, want ChangeSize when allowed", got)
	}
}
