package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// elfInfo is what the dynamic loader would do for one ELF file.
type elfInfo struct {
	elf    bool     // the file is an ELF executable or shared object
	interp string   // PT_INTERP: the loader an executable names; "" for none
	needed []string // DT_NEEDED: the shared libraries it links
}

// static is a self-contained ELF file: no loader, no shared libraries (a Go binary
// built with CGO_ENABLED=0, Debian's busybox-static).
func (i elfInfo) static() bool { return i.interp == "" && len(i.needed) == 0 }

// readELF reads file's ELF headers. A file that is not an ELF executable or shared
// object (a script, an object file, data) has elf false and no error.
func readELF(file string) (elfInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return elfInfo{}, err
	}
	defer f.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(f, magic); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return elfInfo{}, nil // shorter than the magic number
	} else if err != nil {
		return elfInfo{}, err
	}
	if string(magic) != elf.ELFMAG {
		return elfInfo{}, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return elfInfo{}, fmt.Errorf("%s: %w", file, err)
	}
	defer ef.Close()
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return elfInfo{}, nil
	}
	info := elfInfo{elf: true}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return elfInfo{}, fmt.Errorf("%s: PT_INTERP: %w", file, err)
		}
		info.interp = string(bytes.TrimRight(data, "\x00"))
	}
	if info.needed, err = ef.ImportedLibraries(); err != nil {
		return elfInfo{}, fmt.Errorf("%s: %w", file, err)
	}
	return info, nil
}

// checkStatic refuses a binary with an interpreter or shared-library dependencies.
func checkStatic(file string) error {
	info, err := readELF(file)
	if err != nil {
		return err
	}
	switch {
	case !info.elf:
		return fmt.Errorf("%s is not an ELF executable", file)
	case info.interp != "":
		return fmt.Errorf("%s is dynamically linked (has an ELF interpreter); build it with CGO_ENABLED=0", file)
	case len(info.needed) > 0:
		return fmt.Errorf("%s needs shared libraries %v; build it with CGO_ENABLED=0", file, info.needed)
	}
	return nil
}

// dynamicFiles lists the ELF files under root that the dynamic loader has to resolve,
// as "PATH INTERP" lines (PATH absolute in root; INTERP "-" for a shared object
// without one), sorted by path. Static files are left out. Symlinks are not followed.
func dynamicFiles(root string, w io.Writer) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := readELF(p)
		if err != nil {
			return err
		}
		if !info.elf || info.static() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		interp := info.interp
		if interp == "" {
			interp = "-"
		}
		if strings.ContainsAny(rel, " \n") {
			return fmt.Errorf("%s: a space or newline in an ELF file's name", p)
		}
		_, err = fmt.Fprintf(w, "/%s %s\n", filepath.ToSlash(rel), interp)
		return err
	})
}

// dynamic is the subcommand: `kproxy-image dynamic --root DIR`.
func dynamic(args []string) error {
	fl := flag.NewFlagSet("dynamic", flag.ExitOnError)
	root := fl.String("root", "", "directory (an image's flattened filesystem)")
	_ = fl.Parse(args)
	if *root == "" {
		return errors.New("dynamic: --root is required")
	}
	return dynamicFiles(*root, os.Stdout)
}
