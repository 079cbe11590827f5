package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/image"
)

// listFlag is a repeatable string flag (--file, --env, --label, ...).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// cleanDest checks a path in the image: absolute and clean, not "/".
func cleanDest(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return "", fmt.Errorf("%q is not an absolute, clean path in the image", p)
	}
	return p, nil
}

// parseMode reads an octal mode (permission bits and the sticky bit: 755, 0644, 1777).
func parseMode(s string) (fs.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n&^0o1777 != 0 {
		return 0, fmt.Errorf("mode %q: want octal permission bits (and the sticky bit), e.g. 0755", s)
	}
	mode := fs.FileMode(n & 0o777)
	if n&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode, nil
}

// fileSpec is --file or --static-file SRC:DST[:MODE]: the host file SRC at DST in the
// image, with MODE (octal) or else SRC's permission bits.
type fileSpec struct {
	src, dst string
	mode     fs.FileMode
	hasMode  bool
}

func parseFileSpec(s string) (fileSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return fileSpec{}, fmt.Errorf("file %q: want SRC:DST[:MODE]", s)
	}
	dst, err := cleanDest(parts[1])
	if err != nil {
		return fileSpec{}, fmt.Errorf("file %q: %w", s, err)
	}
	spec := fileSpec{src: parts[0], dst: dst}
	if len(parts) == 3 {
		if spec.mode, err = parseMode(parts[2]); err != nil {
			return fileSpec{}, fmt.Errorf("file %q: %w", s, err)
		}
		spec.hasMode = true
	}
	return spec, nil
}

// load reads the host file (following symlinks: the image gets its content).
func (f fileSpec) load() (image.File, error) {
	st, err := os.Stat(f.src)
	if err != nil {
		return image.File{}, err
	}
	if !st.Mode().IsRegular() {
		return image.File{}, fmt.Errorf("%s is not a regular file", f.src)
	}
	content, err := os.ReadFile(f.src)
	if err != nil {
		return image.File{}, err
	}
	mode := st.Mode() & (fs.ModePerm | fs.ModeSticky)
	if f.hasMode {
		mode = f.mode
	}
	return image.File{Path: f.dst, Mode: mode, Content: content}, nil
}

// parseDirSpec is --dir DST[:MODE]: an (empty) directory, mode 0755 unless given.
func parseDirSpec(s string) (image.File, error) {
	p, m, hasMode := strings.Cut(s, ":")
	dst, err := cleanDest(p)
	if err != nil {
		return image.File{}, fmt.Errorf("dir %q: %w", s, err)
	}
	mode := fs.FileMode(0o755)
	if hasMode {
		if mode, err = parseMode(m); err != nil {
			return image.File{}, fmt.Errorf("dir %q: %w", s, err)
		}
	}
	return image.File{Path: dst, Mode: fs.ModeDir | mode}, nil
}

// parseSymlinkSpec is --symlink DST:TARGET: DST in the image is a symlink to TARGET
// (relative to DST's directory, or absolute in the image).
func parseSymlinkSpec(s string) (image.File, error) {
	p, target, ok := strings.Cut(s, ":")
	if !ok || target == "" {
		return image.File{}, fmt.Errorf("symlink %q: want DST:TARGET", s)
	}
	dst, err := cleanDest(p)
	if err != nil {
		return image.File{}, fmt.Errorf("symlink %q: %w", s, err)
	}
	return image.File{Path: dst, Mode: fs.ModeSymlink | 0o777, Link: target}, nil
}

// parseArgv reads --entrypoint or --cmd: a JSON array of strings, as a Dockerfile's
// exec form (["nginx", "-g", "daemon off;"]), or else one word ("/agnhost"). The
// empty string and [] are no value.
func parseArgv(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if !strings.HasPrefix(s, "[") {
		return []string{s}, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		return nil, fmt.Errorf("%q: want a JSON array of strings: %w", s, err)
	}
	if len(argv) == 0 {
		return nil, nil
	}
	return argv, nil
}

// parseKeyValue reads KEY=VALUE (--env, --label); KEY is not empty.
func parseKeyValue(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%q: want KEY=VALUE", s)
	}
	return k, v, nil
}

// environment is the image's Env: defaultPath first unless an --env sets PATH, then
// the --env values in their order.
func environment(envs []string) ([]string, error) {
	out := []string{}
	hasPath := false
	for _, e := range envs {
		k, _, err := parseKeyValue(e)
		if err != nil {
			return nil, fmt.Errorf("env %w", err)
		}
		hasPath = hasPath || k == "PATH"
	}
	if !hasPath {
		out = append(out, defaultPath)
	}
	return append(out, envs...), nil
}

// labelSet is the image's labels: kproxy's own when version is set (the product
// image), then each --label, which overrides one of the same key. Nil when empty.
func labelSet(version string, labels []string) (map[string]string, error) {
	m := map[string]string{}
	if version != "" {
		m["org.opencontainers.image.title"] = "kproxy"
		m["org.opencontainers.image.version"] = version
		m["io.kproxy.version"] = version
	}
	for _, l := range labels {
		k, v, err := parseKeyValue(l)
		if err != nil {
			return nil, fmt.Errorf("label %w", err)
		}
		m[k] = v
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
