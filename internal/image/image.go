package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of a layer.
type File struct {
	// Path is absolute and clean, e.g. /usr/sbin/nft.
	Path string
	// Mode holds the permission bits and, for a directory or a symlink, fs.ModeDir or
	// fs.ModeSymlink. Other type bits are refused.
	Mode fs.FileMode
	// Content is a regular file's content.
	Content []byte
	// Link is a symlink's target.
	Link string
}

// Config is what the image's configuration says besides its layers.
type Config struct {
	Architecture string // e.g. amd64
	Entrypoint   []string
	Cmd          []string
	Env          []string
	User         string // e.g. 1000 or 1000:50000; empty is root
	WorkingDir   string
	Labels       map[string]string
	// Created is the time written into the image (config, history, tar entries);
	// the Unix epoch when zero.
	Created time.Time
}

func fixedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC()
}

// Tar returns the layer's uncompressed tar stream (see the package contract).
func Tar(files []File, created time.Time) ([]byte, error) {
	mtime := fixedTime(created)
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("image: path %q is not absolute and clean", f.Path)
		}
		if f.Mode.Type()&^(fs.ModeDir|fs.ModeSymlink) != 0 || f.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			return nil, fmt.Errorf("image: %s: unsupported file type %v", f.Path, f.Mode.Type())
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("image: %s given twice", f.Path)
		}
		byPath[f.Path] = f
	}
	// Parent directories that were not given.
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if d, ok := byPath[dir]; ok {
				if !d.Mode.IsDir() {
					return nil, fmt.Errorf("image: %s is a parent of %s but not a directory", dir, p)
				}
				continue
			}
			byPath[dir] = File{Path: dir, Mode: fs.ModeDir | 0o755}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    tarMode(f.Mode),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case f.Mode&fs.ModeSymlink != 0:
			if f.Link == "" {
				return nil, fmt.Errorf("image: symlink %s has no target", p)
			}
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = f.Link
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Content); err != nil {
				return nil, fmt.Errorf("image: %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return buf.Bytes(), nil
}

// Layer returns the files as a gzip-compressed layer (compressed once, kept in memory).
func Layer(files []File, created time.Time) (v1.Layer, error) {
	data, err := Tar(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return layer, nil
}

// Build stacks one layer per element of layers (the first at the bottom) and sets the
// configuration.
func Build(layers [][]File, cfg Config) (v1.Image, error) {
	if len(layers) == 0 {
		return nil, errors.New("image: no layers")
	}
	created := fixedTime(cfg.Created)
	img := empty.Image
	for i, files := range layers {
		layer, err := Layer(files, created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: fmt.Sprintf("kproxy-image layer %d", i)},
		})
		if err != nil {
			return nil, fmt.Errorf("image: append layer %d: %w", i, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = cfg.Architecture
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = cfg.Cmd
	cf.Config.Env = cfg.Env
	cf.Config.User = cfg.User
	cf.Config.WorkingDir = cfg.WorkingDir
	cf.Config.Labels = cfg.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	return img, nil
}

// tarMode is the tar header's mode: the permission bits and the sticky bit.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
