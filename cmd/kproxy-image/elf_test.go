package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeELF writes a minimal x86-64 ELF executable (no sections) with a PT_INTERP
// program header naming interp, or none when interp is empty (a static binary).
func writeELF(t *testing.T, file, interp string) {
	t.Helper()
	const ehsize, phsize = 64, 56
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Ehsize: ehsize, Phentsize: phsize, Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	if interp != "" {
		hdr.Phoff, hdr.Phnum = ehsize, 1
		n := uint64(len(interp) + 1)
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R),
			Off: ehsize + phsize, Filesz: n, Memsz: n, Align: 1})
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
	}
	if interp != "" {
		buf.WriteString(interp + "\x00")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestReadELF(t *testing.T) {
	dir := t.TempDir()
	static, dynamic, script, short := filepath.Join(dir, "static"), filepath.Join(dir, "dynamic"),
		filepath.Join(dir, "script"), filepath.Join(dir, "short")
	writeELF(t, static, "")
	writeELF(t, dynamic, "/lib64/ld-linux-x86-64.so.2")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("\x7fE"), 0o644); err != nil {
		t.Fatal(err)
	}

	if info, err := readELF(static); err != nil || !info.elf || !info.static() {
		t.Errorf("static: %+v, %v", info, err)
	}
	if info, err := readELF(dynamic); err != nil || !info.elf || info.interp != "/lib64/ld-linux-x86-64.so.2" {
		t.Errorf("dynamic: %+v, %v", info, err)
	}
	for _, f := range []string{script, short} {
		if info, err := readELF(f); err != nil || info.elf {
			t.Errorf("%s: %+v, %v; want no ELF file and no error", f, info, err)
		}
	}

	if err := checkStatic(static); err != nil {
		t.Errorf("checkStatic(static): %v", err)
	}
	if err := checkStatic(dynamic); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("checkStatic(dynamic): %v", err)
	}
	if err := checkStatic(script); err == nil {
		t.Error("checkStatic(script): no error")
	}
}

func TestDynamicFiles(t *testing.T) {
	root := t.TempDir()
	writeELF(t, filepath.Join(root, "usr/sbin/nft"), "/lib64/ld-linux-x86-64.so.2")
	writeELF(t, filepath.Join(root, "bin/busybox"), "")
	writeELF(t, filepath.Join(root, "agnhost"), "")
	writeELF(t, filepath.Join(root, "bin/dash"), "/lib64/ld-linux-x86-64.so.2")
	if err := os.Symlink("dash", filepath.Join(root, "bin/sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc-passwd"), []byte("root:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := dynamicFiles(root, &out); err != nil {
		t.Fatal(err)
	}
	want := "/bin/dash /lib64/ld-linux-x86-64.so.2\n/usr/sbin/nft /lib64/ld-linux-x86-64.so.2\n"
	if out.String() != want {
		t.Errorf("dynamicFiles:\n%s\nwant:\n%s", out.String(), want)
	}
}
