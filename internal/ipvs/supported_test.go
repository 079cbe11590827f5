package ipvs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type fakeVersioner struct {
	version string
	err     error
}

func (v fakeVersioner) Version(context.Context) (string, error) { return v.version, v.err }

func TestCanUse(t *testing.T) {
	ctx := context.Background()
	ok := fakeVersioner{version: "v7.19"}

	t.Run("probe added and deleted", func(t *testing.T) {
		f := NewFake()
		mustDo(t, CanUse(ctx, f, ok, "mh"))
		want := []string{
			"VirtualServers",
			"AddVirtualServer TCP 198.51.100.0:20000 mh",
			"VirtualServers",
			"DeleteVirtualServer TCP 198.51.100.0:20000",
		}
		if got := f.Calls(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls = %q, want %q", got, want)
		}
	})
	t.Run("blank scheduler is rr", func(t *testing.T) {
		f := NewFake()
		mustDo(t, CanUse(ctx, f, ok, ""))
		if got := f.Calls()[1]; got != "AddVirtualServer TCP 198.51.100.0:20000 rr" {
			t.Errorf("probe = %q", got)
		}
	})
	t.Run("an existing virtual server with the scheduler skips the probe", func(t *testing.T) {
		f := NewFake()
		vs := vsTCP
		vs.Scheduler = "lc"
		mustDo(t, f.AddVirtualServer(vs))
		mustDo(t, CanUse(ctx, f, ok, "lc"))
		if got := len(f.Calls()); got != 2 {
			t.Errorf("calls = %q, want the list only", f.Calls())
		}
	})

	for _, tc := range []struct {
		name    string
		ipvs    Interface
		ipset   IPSetVersioner
		sched   string
		wantErr string
	}{
		{"nil ipvs", nil, ok, "rr", "ipvs not supported by the kernel"},
		{"ipset version error", NewFake(), fakeVersioner{err: errors.New("exec: \"ipset\": executable file not found in $PATH")}, "rr",
			"error getting ipset version, error: exec: \"ipset\": executable file not found in $PATH"},
		{"old ipset", NewFake(), fakeVersioner{version: "v5.4"}, "rr", "ipset version: v5.4 is less than min required version: 6.0"},
		{"unparseable ipset version", NewFake(), fakeVersioner{version: "vX"}, "rr", "ipset version: vX is less than min required version: 6.0"},
		{"unknown scheduler", NewFake(), ok, "nosuch", "adding IPVS service"},
		{"no IPVS", withError(NewFake(), "VirtualServers", fmt.Errorf("listing IPVS services: %w", ErrUnavailable)), ok, "rr",
			"ipvs not supported: listing IPVS services: kernel has no IP_VS"},
		{"requests silently ignored", ignoringFake{NewFake()}, ok, "rr", "ipvs not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ipvs Interface
			if tc.ipvs != nil {
				ipvs = tc.ipvs
			}
			err := CanUse(ctx, ipvs, tc.ipset, tc.sched)
			if err == nil {
				t.Fatalf("CanUse succeeded, want %q", tc.wantErr)
			}
			if tc.name == "unknown scheduler" {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("CanUse = %v, want the add's error", err)
				}
				return
			}
			if err.Error() != tc.wantErr {
				t.Errorf("CanUse = %q, want %q", err, tc.wantErr)
			}
		})
	}
}

func withError(f *Fake, method string, err error) *Fake {
	f.SetError(method, err)
	return f
}

// ignoringFake accepts additions and keeps nothing, as moby/ipvs does when
// the kernel had no IPVS at its first use (its issue 27).
type ignoringFake struct{ *Fake }

func (ignoringFake) AddVirtualServer(VirtualServer) error { return nil }
