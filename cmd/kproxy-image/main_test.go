package main

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/kproxy/kproxy/internal/image"
)

func TestParseFileSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fileSpec
	}{
		{"_output/bin/agnhost:/agnhost", fileSpec{src: "_output/bin/agnhost", dst: "/agnhost"}},
		{"a.crt:/localhost.crt:0644", fileSpec{src: "a.crt", dst: "/localhost.crt", mode: 0o644, hasMode: true}},
		{"x:/tmp/x:1777", fileSpec{src: "x", dst: "/tmp/x", mode: fs.ModeSticky | 0o777, hasMode: true}},
	} {
		got, err := parseFileSpec(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseFileSpec(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "src", ":/dst", "src:dst", "src:/a/../b", "src:/", "src:/x:9",
		"src:/x:4755", "src:/x:0644:extra"} {
		if _, err := parseFileSpec(bad); err == nil {
			t.Errorf("parseFileSpec(%q): no error", bad)
		}
	}
}

func TestParseDirAndSymlink(t *testing.T) {
	if f, err := parseDirSpec("/uploads"); err != nil || f.Path != "/uploads" || f.Mode != fs.ModeDir|0o755 {
		t.Errorf("dir /uploads: %+v, %v", f, err)
	}
	if f, err := parseDirSpec("/tmp:1777"); err != nil || f.Mode != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Errorf("dir /tmp:1777: %+v, %v", f, err)
	}
	if f, err := parseSymlinkSpec("/agnhost-2:agnhost"); err != nil || f.Path != "/agnhost-2" ||
		f.Link != "agnhost" || f.Mode.Type() != fs.ModeSymlink {
		t.Errorf("symlink: %+v, %v", f, err)
	}
	for _, bad := range []string{"relative", "/x:", "/x"} {
		if _, err := parseSymlinkSpec(bad); err == nil {
			t.Errorf("parseSymlinkSpec(%q): no error", bad)
		}
	}
	if _, err := parseDirSpec("uploads"); err == nil {
		t.Error("parseDirSpec(relative): no error")
	}
}

func TestParseArgv(t *testing.T) {
	for in, want := range map[string][]string{
		`["nginx", "-g", "daemon off;"]`: {"nginx", "-g", "daemon off;"},
		`/agnhost`:                       {"/agnhost"},
		`[]`:                             nil,
		``:                               nil,
	} {
		got, err := parseArgv(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseArgv(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseArgv(`["unterminated"`); err == nil {
		t.Error("bad JSON: no error")
	}
}

func TestEnvironmentAndLabels(t *testing.T) {
	env, err := environment(nil)
	if err != nil || !reflect.DeepEqual(env, []string{defaultPath}) {
		t.Errorf("environment(nil) = %q, %v", env, err)
	}
	env, err = environment([]string{"A=1", "PATH=/bin"})
	if err != nil || !reflect.DeepEqual(env, []string{"A=1", "PATH=/bin"}) {
		t.Errorf("environment with PATH = %q, %v", env, err)
	}
	if _, err := environment([]string{"=x"}); err == nil {
		t.Error("environment(=x): no error")
	}

	labels, err := labelSet("", nil)
	if err != nil || labels != nil {
		t.Errorf("labelSet() = %v, %v; want nil", labels, err)
	}
	labels, err = labelSet("v1", []string{"org.opencontainers.image.title=kube-proxy", "x=y"})
	want := map[string]string{"org.opencontainers.image.title": "kube-proxy", "org.opencontainers.image.version": "v1",
		"io.kproxy.version": "v1", "x": "y"}
	if err != nil || !reflect.DeepEqual(labels, want) {
		t.Errorf("labelSet = %v, %v; want %v", labels, err, want)
	}
}

// files returns the image's flattened filesystem as tar headers (and regular files'
// contents) by path.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, contents := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, contents
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs[strings.TrimSuffix(h.Name, "/")] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			contents[h.Name] = string(b)
		}
	}
}

func TestBuildGeneralImage(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/dash"), []byte("dash"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dash", filepath.Join(rootfs, "bin/sh")); err != nil {
		t.Fatal(err)
	}
	agnhost, crt := filepath.Join(dir, "agnhost"), filepath.Join(dir, "localhost.crt")
	writeELF(t, agnhost, "")
	if err := os.WriteFile(crt, []byte("cert"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := parseBuildFlags([]string{"--rootfs", rootfs, "--tag", "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
		"--output", filepath.Join(dir, "out.tar"),
		"--static-file", agnhost + ":/agnhost", "--file", crt + ":/localhost.crt:0644", "--file", crt + ":/etc/crt",
		"--dir", "/uploads", "--symlink", "/agnhost-2:agnhost",
		"--entrypoint", `["/agnhost"]`, "--cmd", "pause", "--env", "A=1", "--user", "1000:50000",
		"--workdir", "/uploads", "--label", "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := b.assemble()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{"/agnhost"}) || !reflect.DeepEqual(c.Cmd, []string{"pause"}) ||
		!reflect.DeepEqual(c.Env, []string{defaultPath, "A=1"}) || c.User != "1000:50000" ||
		c.WorkingDir != "/uploads" || !reflect.DeepEqual(c.Labels, map[string]string{"k": "v"}) ||
		len(cf.RootFS.DiffIDs) != 2 || !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("config %+v", cf)
	}
	hdrs, contents := files(t, img)
	for name, mode := range map[string]int64{"agnhost": 0o755, "localhost.crt": 0o644, "etc/crt": 0o600,
		"uploads": 0o755, "bin/dash": 0o755} {
		if h := hdrs[name]; h == nil || h.Mode != mode {
			t.Errorf("%s: %+v, want mode %o", name, h, mode)
		}
	}
	if h := hdrs["agnhost-2"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "agnhost" {
		t.Errorf("agnhost-2: %+v", h)
	}
	if h := hdrs["bin/sh"]; h == nil || h.Linkname != "dash" {
		t.Errorf("bin/sh: %+v", h)
	}
	if contents["localhost.crt"] != "cert" {
		t.Errorf("localhost.crt: %q", contents["localhost.crt"])
	}

	// A dynamically linked --static-file is refused.
	dyn := filepath.Join(dir, "dyn")
	writeELF(t, dyn, "/lib64/ld-linux-x86-64.so.2")
	b, err = parseBuildFlags([]string{"--tag", "x:y", "--output", "o", "--static-file", dyn + ":/dyn"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.assemble(); err == nil {
		t.Error("dynamic --static-file: no error")
	}
}

// The product image's command line gives what it gave before the flags were general:
// two layers, the binary as the entrypoint, PATH, kproxy's labels.
func TestBuildProductImage(t *testing.T) {
	dir := t.TempDir()
	rootfs, binary := filepath.Join(dir, "rootfs"), filepath.Join(dir, "kube-proxy")
	if err := os.MkdirAll(filepath.Join(rootfs, "usr/sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "usr/sbin/nft"), []byte("nft"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, binary, "")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	b, err := parseBuildFlags([]string{"--rootfs", rootfs, "--binary", binary, "--tag", "kproxy.local/kube-proxy:v1",
		"--version", "v1", "--output", filepath.Join(dir, "out.tar")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.assemble()
	if err != nil {
		t.Fatal(err)
	}

	// The image as the command built it before (by hand).
	base, err := image.FromFS(os.DirFS(rootfs), "/")
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	want, err := image.Build([][]image.File{base, {{Path: binaryPath, Mode: 0o755, Content: content}}}, image.Config{
		Architecture: "amd64",
		Entrypoint:   []string{binaryPath},
		Env:          []string{defaultPath},
		Labels: map[string]string{"org.opencontainers.image.title": "kproxy",
			"org.opencontainers.image.version": "v1", "io.kproxy.version": "v1"},
		Created: time.Unix(1700000000, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	dg, err := got.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dw, err := want.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if dg != dw {
		t.Errorf("product image digest %s, want %s", dg, dw)
	}
}

func TestParseBuildFlagsRequires(t *testing.T) {
	for _, args := range [][]string{
		{"--output", "o", "--rootfs", "r"},
		{"--tag", "x:y", "--rootfs", "r"},
		{"--tag", "x:y", "--output", "o"},
		{"--tag", "x:y", "--output", "o", "--rootfs", "r", "extra"},
	} {
		if _, err := parseBuildFlags(args); err == nil {
			t.Errorf("parseBuildFlags(%q): no error", args)
		}
	}
}
