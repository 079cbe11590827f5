package ipset

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFakeRestore(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	mustDo(t, f.Restore(ctx, []byte("create A hash:ip,port family inet hashsize 1024 maxelem 65536\nadd A 10.0.0.1,tcp:80\nadd A 10.0.0.1,tcp:80\ndel A 10.0.0.2,tcp:80\n")))
	// -exist: the same create again is a no-op, other options are not.
	mustDo(t, f.Restore(ctx, []byte("create A hash:ip,port family inet hashsize 1024 maxelem 65536\n")))
	if err := f.Restore(ctx, []byte("create A hash:ip,port family inet6 hashsize 1024 maxelem 65536\n")); err == nil {
		t.Error("create with other options succeeded")
	}
	// A failing script changes nothing.
	if err := f.Restore(ctx, []byte("add A 10.0.0.3,tcp:80\nadd B 1.2.3.4\n")); !errors.Is(err, ErrNotFound) {
		t.Errorf("add to a missing set = %v, want ErrNotFound", err)
	}
	got, err := f.Save(ctx)
	mustDo(t, err)
	if diff := cmp.Diff(map[string][]string{"A": {"10.0.0.1,tcp:80"}}, got); diff != "" {
		t.Errorf("Save (-want +got):\n%s", diff)
	}
	mustDo(t, f.Destroy(ctx, "A"), f.Destroy(ctx, "A"))
	if names, _ := f.ListSets(ctx); len(names) != 0 {
		t.Errorf("sets after Destroy: %v", names)
	}
	if _, err := f.Entries(ctx, "A"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Entries of a destroyed set = %v, want ErrNotFound", err)
	}
	if len(f.Restores()) != 4 {
		t.Errorf("Restores = %d scripts, want 4", len(f.Restores()))
	}
}

func TestFakeChecksNotation(t *testing.T) {
	for _, tc := range []struct {
		typ   Type
		entry string
		ok    bool
	}{
		{HashIPPort, "10.96.0.10,udp:53", true},
		{HashIPPort, "fd00::a,sctp:80", true},
		{HashIPPort, "10.96.0.10,UDP:53", false},
		{HashIPPort, "10.96.0.10,53", false},
		{HashIPPort, "fd00:0::a,tcp:80", false},
		{HashIPPort, "10.96.0.10,tcp:domain", false},
		{HashIPPortIP, "10.0.0.1,tcp:80,10.0.0.1", true},
		{HashIPPortIP, "10.0.0.1,tcp:80", false},
		{HashIPPortNet, "10.0.0.1,tcp:80,192.0.2.0/24", true},
		{HashIPPortNet, "10.0.0.1,tcp:80,192.0.2.1/24", false},
		{HashIPPortNet, "10.0.0.1,tcp:80,192.0.2.1", true},
		{HashIPPortNet, "10.0.0.1,tcp:80,192.0.2.1/32", false},
		{HashIP, "10.0.0.1", true},
		{HashIP, "10.0.0.1,tcp:80", false},
		{BitmapPort, "30080", true},
		{BitmapPort, "030080", false},
		{BitmapPort, "70000", false},
	} {
		err := checkEntry(tc.typ, tc.entry)
		if (err == nil) != tc.ok {
			t.Errorf("checkEntry(%s, %q) = %v, want ok=%v", tc.typ, tc.entry, err, tc.ok)
		}
	}
}

func TestFakeInjectedErrors(t *testing.T) {
	f := NewFake()
	boom := errors.New("boom")
	f.SetError("Version", boom)
	if _, err := f.Version(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Version = %v, want the injected error", err)
	}
	f.SetError("Version", nil)
	if v, err := f.Version(context.Background()); err != nil || v != "v7.19" {
		t.Errorf("Version = %q, %v", v, err)
	}
}
