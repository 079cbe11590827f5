package syncer

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFamiliesSyncsAllAndJoinsErrors(t *testing.T) {
	var order []v1.IPFamily
	record := func(f v1.IPFamily, wrote bool, err error) Syncer {
		return SyncerFunc(func(context.Context) (bool, error) {
			order = append(order, f)
			return wrote, err
		})
	}
	errV4 := errors.New("v4 broke")
	errV6 := errors.New("v6 broke")

	tests := []struct {
		name             string
		v4, v6           error
		v4Wrote, v6Wrote bool
		wantErrs         []error
		wantWrote        bool
		wantOrder        []v1.IPFamily
	}{
		{"both ok, nothing written", nil, nil, false, false, nil, false, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
		{"only v6 wrote", nil, nil, false, true, nil, true, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
		{"v4 fails, v6 still syncs", errV4, nil, true, false, []error{errV4}, true, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
		{"both fail", errV4, errV6, true, true, []error{errV4, errV6}, true, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			order = nil
			f := NewFamilies(map[v1.IPFamily]Syncer{
				v1.IPv6Protocol: record(v1.IPv6Protocol, tc.v6Wrote, tc.v6),
				v1.IPv4Protocol: record(v1.IPv4Protocol, tc.v4Wrote, tc.v4),
			})
			wrote, err := f.Sync(context.Background())
			if wrote != tc.wantWrote {
				t.Errorf("Sync wrote = %t, want %t", wrote, tc.wantWrote)
			}
			if len(tc.wantErrs) == 0 && err != nil {
				t.Fatalf("Sync = %v, want nil", err)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Sync error %v does not wrap %v", err, want)
				}
			}
			if len(order) != len(tc.wantOrder) || order[0] != tc.wantOrder[0] || order[1] != tc.wantOrder[1] {
				t.Errorf("order = %v, want %v", order, tc.wantOrder)
			}
		})
	}
}

func TestFamiliesSingleStack(t *testing.T) {
	f := NewFamilies(map[v1.IPFamily]Syncer{v1.IPv6Protocol: SyncerFunc(func(context.Context) (bool, error) { return false, nil }), v1.IPv4Protocol: nil})
	got := f.Families()
	if len(got) != 1 || got[0] != v1.IPv6Protocol {
		t.Fatalf("Families() = %v, want [IPv6]", got)
	}
}
