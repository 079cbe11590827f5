package sysctl

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"net.ipv4.ip_forward":                   "net/ipv4/ip_forward",
		"net/ipv4/ip_forward":                   "net/ipv4/ip_forward",
		"net/ipv4/conf/eth0.100/route_localnet": "net/ipv4/conf/eth0.100/route_localnet",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProcReadWrite(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "net", "netfilter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nf_conntrack_max"), []byte("131072\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Root: root}
	v, err := p.Get("net.netfilter.nf_conntrack_max")
	if err != nil || v != 131072 {
		t.Fatalf("Get = %d, %v", v, err)
	}
	if err := p.Set("net/netfilter/nf_conntrack_max", 262144); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Get("net/netfilter/nf_conntrack_max"); v != 262144 {
		t.Fatalf("after Set got %d", v)
	}
	// A missing sysctl is never created.
	if err := p.Set("net/netfilter/nope", 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Set missing = %v, want ErrNotExist", err)
	}
}

func TestModuleParam(t *testing.T) {
	root := t.TempDir()
	m := &SysModuleParam{Root: root, Module: "nf_conntrack", Name: "hashsize"}
	if _, err := m.Get(); err == nil {
		t.Fatal("expected error for missing parameter")
	}
	if err := os.MkdirAll(filepath.Join(root, "nf_conntrack", "parameters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path(), []byte("65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(1024); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get(); err != nil || v != 1024 {
		t.Fatalf("Get = %d, %v", v, err)
	}
}

func TestFakeReadOnly(t *testing.T) {
	f := NewFake(map[string]int{"net.ipv4.ip_forward": 0})
	f.SetReadOnly("net/ipv4/ip_forward")
	if err := f.Set("net.ipv4.ip_forward", 1); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Set = %v, want ErrPermission", err)
	}
	if _, err := f.Get("net/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get missing = %v", err)
	}
}

func TestOOMScoreAdj(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ApplyOOMScoreAdj(context.Background(), SelfOOMScoreAdj{Path: path}, -999)
	data, _ := os.ReadFile(path)
	if string(data) != "-999" {
		t.Fatalf("oom_score_adj = %q", data)
	}
	if err := (SelfOOMScoreAdj{Path: path}).SetOOMScoreAdj(1001); err == nil {
		t.Fatal("expected range error")
	}
	// Failure is only logged.
	fake := &FakeOOMScoreAdjuster{Err: fs.ErrPermission}
	ApplyOOMScoreAdj(context.Background(), fake, -999)
	if fake.Value != nil {
		t.Fatal("unexpected value recorded")
	}
}
