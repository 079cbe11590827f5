package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"
)

func sample() []File {
	return []File{
		{Path: "/usr/sbin/xtables-nft-multi", Mode: 0o755, Content: []byte("\x7fELF nft")},
		{Path: "/usr/sbin/iptables", Mode: fs.ModeSymlink | 0o777, Link: "xtables-nft-multi"},
		{Path: "/etc/protocols", Mode: 0o644, Content: []byte("tcp 6 TCP\n")},
		{Path: "/lib64", Mode: fs.ModeSymlink | 0o777, Link: "usr/lib64"},
	}
}

func reversed(in []File) []File {
	out := make([]File, len(in))
	for i, f := range in {
		out[len(in)-1-i] = f
	}
	return out
}

func entries(t *testing.T, data []byte) []*tar.Header {
	t.Helper()
	var hdrs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

func TestTarSortedWithParentsAndFixedMetadata(t *testing.T) {
	created := time.Unix(1700000000, 0)
	data, err := Tar(sample(), created)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range entries(t, data) {
		names = append(names, h.Name)
		if !h.ModTime.Equal(created) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: times %v %v %v, want only mtime %v", h.Name, h.ModTime, h.AccessTime, h.ChangeTime, created)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q, want 0:0", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	want := []string{"etc/", "etc/protocols", "lib64", "usr/", "usr/sbin/", "usr/sbin/iptables", "usr/sbin/xtables-nft-multi"}
	if len(names) != len(want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %q, want %q", names, want)
		}
	}
}

func TestTarZeroTimeIsEpoch(t *testing.T) {
	data, err := Tar(sample(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range entries(t, data) {
		if h.ModTime.Unix() != 0 {
			t.Errorf("%s: mtime %v, want the Unix epoch", h.Name, h.ModTime)
		}
	}
}

func TestSameInputsSameDigest(t *testing.T) {
	cfg := Config{Architecture: "amd64", Entrypoint: []string{"/usr/local/bin/kube-proxy"},
		Labels: map[string]string{"io.kproxy.version": "v0.1.0"}, Created: time.Unix(1700000000, 0)}
	bin := []File{{Path: "/usr/local/bin/kube-proxy", Mode: 0o755, Content: []byte("binary")}}
	a, err := Build([][]File{sample(), bin}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build([][]File{reversed(sample()), bin}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Fatalf("digests differ for the same inputs: %s %s", da, db)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(cfg.Created) ||
		cf.Config.Labels["io.kproxy.version"] != "v0.1.0" || len(cf.RootFS.DiffIDs) != 2 {
		t.Fatalf("config %+v", cf)
	}

	// A different time or content changes the digest.
	cfg2 := cfg
	cfg2.Created = time.Unix(1700000001, 0)
	c, err := Build([][]File{sample(), bin}, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Fatal("a different time gave the same digest")
	}
}

func TestTarRefusesBadInput(t *testing.T) {
	for name, files := range map[string][]File{
		"relative":  {{Path: "etc/x", Mode: 0o644}},
		"unclean":   {{Path: "/etc//x", Mode: 0o644}},
		"root":      {{Path: "/", Mode: fs.ModeDir | 0o755}},
		"duplicate": {{Path: "/x", Mode: 0o644}, {Path: "/x", Mode: 0o644}},
		"device":    {{Path: "/dev/null", Mode: fs.ModeDevice | 0o666}},
		"no target": {{Path: "/x", Mode: fs.ModeSymlink | 0o777}},
		"parent":    {{Path: "/x", Mode: 0o644}, {Path: "/x/y", Mode: 0o644}},
	} {
		if _, err := Tar(files, time.Time{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestFromFS(t *testing.T) {
	fsys := fstest.MapFS{
		"usr/sbin/nft":      {Data: []byte("nft"), Mode: 0o755, ModTime: time.Now()},
		"usr/sbin/iptables": {Data: []byte("xtables-nft-multi"), Mode: fs.ModeSymlink | 0o777},
	}
	files, err := FromFS(fsys, "/")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		got[f.Path] = f
	}
	if f := got["/usr/sbin/nft"]; f.Mode != 0o755 || string(f.Content) != "nft" {
		t.Errorf("nft: %+v", f)
	}
	if f := got["/usr/sbin/iptables"]; f.Mode.Type() != fs.ModeSymlink || f.Link != "xtables-nft-multi" {
		t.Errorf("iptables: %+v", f)
	}
	if f := got["/usr/sbin"]; !f.Mode.IsDir() {
		t.Errorf("usr/sbin: %+v", f)
	}
}

func TestBuildCmdUserWorkingDir(t *testing.T) {
	bin := []File{{Path: "/agnhost", Mode: 0o755, Content: []byte("agnhost")}}
	cfg := Config{Architecture: "amd64", Entrypoint: []string{"/agnhost"}}
	plain, err := Build([][]File{bin}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cmd, cfg.User, cfg.WorkingDir = []string{"pause"}, "1000:50000", "/uploads"
	full, err := Build([][]File{bin}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := full.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != "pause" || cf.Config.User != "1000:50000" ||
		cf.Config.WorkingDir != "/uploads" {
		t.Fatalf("config %+v", cf.Config)
	}
	// Left empty, they are absent from the config: the same bytes as an image built
	// before they existed.
	raw, err := plain.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"Cmd"`, `"User"`, `"WorkingDir"`} {
		if bytes.Contains(raw, []byte(key)) {
			t.Errorf("config without %s has it: %s", key, raw)
		}
	}
}
