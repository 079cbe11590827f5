// Command kproxy-image assembles container images from files on the build host: kproxy's
// own (make image, hack/image.sh) and the test cluster's (make cluster-images,
// hack/cluster-images.sh).
//
//	kproxy-image build --tag NAME:TAG --output FILE [--rootfs DIR]... [--binary FILE]
//	    [--file SRC:DST[:MODE]]... [--static-file SRC:DST[:MODE]]... [--dir DST[:MODE]]...
//	    [--symlink DST:TARGET]... [--entrypoint ARGV] [--cmd ARGV] [--env K=V]...
//	    [--user U] [--workdir DIR] [--label K=V]... [--version V]
//	kproxy-image unpack --image FILE --dir DIR
//	kproxy-image dynamic --root DIR
//
// build writes one layer per --rootfs directory (in the order given; the distribution's
// files, as extracted from .deb files), then, when any is given, one layer of the
// single files: --binary (the product binary, at /usr/local/bin/kube-proxy, also the
// default entrypoint), --file, --static-file (refused unless a statically linked ELF
// file, as --binary), --dir and --symlink. ARGV is a JSON array of strings (a
// Dockerfile's exec form) or one word. PATH is set to the usual directories unless an
// --env sets it. --version adds kproxy's labels (title kproxy, its version); a --label
// overrides one of them. The image is written as a docker-archive tarball (docker load,
// ctr images import), with the times taken from SOURCE_DATE_EPOCH (the Unix epoch when
// unset), and its digests and sizes are printed. unpack writes the flattened filesystem
// of such a tarball into DIR (the smoke tests). dynamic lists the ELF files under DIR
// that the dynamic loader must resolve, with the loader each names (the scripts then
// run that loader's --list chrooted in DIR: hack/lib/debs.sh).
package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kproxy/kproxy/internal/image"
)

const (
	binaryPath  = "/usr/local/bin/kube-proxy"
	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kproxy-image build|unpack|dynamic [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "unpack":
		err = unpack(os.Args[2:])
	case "dynamic":
		err = dynamic(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-image:", err)
		os.Exit(1)
	}
}

// buildFlags are build's command line.
type buildFlags struct {
	rootfs, files, staticFiles, dirs, symlinks, env, labels            listFlag
	binary, tag, version, output, entrypoint, cmd, user, workdir, arch string
	entrypointSet                                                      bool
}

func parseBuildFlags(args []string) (*buildFlags, error) {
	var b buildFlags
	fl := flag.NewFlagSet("build", flag.ContinueOnError)
	fl.Var(&b.rootfs, "rootfs", "directory of files for one layer (repeatable, bottom first)")
	fl.StringVar(&b.binary, "binary", "", "the static product binary, at "+binaryPath)
	fl.Var(&b.files, "file", "SRC:DST[:MODE], a host file in the image (repeatable)")
	fl.Var(&b.staticFiles, "static-file", "SRC:DST[:MODE], as --file, refused unless statically linked")
	fl.Var(&b.dirs, "dir", "DST[:MODE], a directory (repeatable; mode 0755 by default)")
	fl.Var(&b.symlinks, "symlink", "DST:TARGET, a symlink (repeatable)")
	fl.StringVar(&b.entrypoint, "entrypoint", "", `the entrypoint, a JSON array (["/agnhost"]) or one word`)
	fl.StringVar(&b.cmd, "cmd", "", `the default arguments, a JSON array (["pause"]) or one word`)
	fl.Var(&b.env, "env", "KEY=VALUE in the environment (repeatable)")
	fl.StringVar(&b.user, "user", "", "the user the image runs as (empty: root)")
	fl.StringVar(&b.workdir, "workdir", "", "the working directory")
	fl.Var(&b.labels, "label", "KEY=VALUE label (repeatable)")
	fl.StringVar(&b.version, "version", "", "kproxy's version (adds kproxy's labels)")
	fl.StringVar(&b.arch, "arch", "amd64", "the image's architecture")
	fl.StringVar(&b.tag, "tag", "", "image name and tag")
	fl.StringVar(&b.output, "output", "", "docker-archive tarball to write")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if fl.NArg() > 0 {
		return nil, fmt.Errorf("build: unexpected arguments %q", fl.Args())
	}
	fl.Visit(func(f *flag.Flag) { b.entrypointSet = b.entrypointSet || f.Name == "entrypoint" })
	if b.tag == "" || b.output == "" {
		return nil, errors.New("build: --tag and --output are required")
	}
	if len(b.rootfs)+len(b.files)+len(b.staticFiles)+len(b.dirs)+len(b.symlinks) == 0 && b.binary == "" {
		return nil, errors.New("build: no content: give --rootfs, --binary, --file, --static-file, --dir or --symlink")
	}
	return &b, nil
}

// layers reads the layers' files: each --rootfs, then the single files.
func (b *buildFlags) layers() ([][]image.File, error) {
	var layers [][]image.File
	for _, dir := range b.rootfs {
		files, err := image.FromFS(os.DirFS(dir), "/")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		layers = append(layers, files)
	}
	var top []image.File
	if b.binary != "" {
		if err := checkStatic(b.binary); err != nil {
			return nil, err
		}
		content, err := os.ReadFile(b.binary)
		if err != nil {
			return nil, err
		}
		top = append(top, image.File{Path: binaryPath, Mode: 0o755, Content: content})
	}
	for i, list := range []listFlag{b.staticFiles, b.files} {
		for _, s := range list {
			spec, err := parseFileSpec(s)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				if err := checkStatic(spec.src); err != nil {
					return nil, err
				}
			}
			f, err := spec.load()
			if err != nil {
				return nil, err
			}
			top = append(top, f)
		}
	}
	for _, s := range b.dirs {
		f, err := parseDirSpec(s)
		if err != nil {
			return nil, err
		}
		top = append(top, f)
	}
	for _, s := range b.symlinks {
		f, err := parseSymlinkSpec(s)
		if err != nil {
			return nil, err
		}
		top = append(top, f)
	}
	if len(top) > 0 {
		layers = append(layers, top)
	}
	return layers, nil
}

// config is the image's configuration besides its layers.
func (b *buildFlags) config(created time.Time) (image.Config, error) {
	cfg := image.Config{Architecture: b.arch, User: b.user, WorkingDir: b.workdir, Created: created}
	var err error
	if b.entrypointSet {
		if cfg.Entrypoint, err = parseArgv(b.entrypoint); err != nil {
			return image.Config{}, fmt.Errorf("entrypoint %w", err)
		}
	} else if b.binary != "" {
		cfg.Entrypoint = []string{binaryPath}
	}
	if cfg.Cmd, err = parseArgv(b.cmd); err != nil {
		return image.Config{}, fmt.Errorf("cmd %w", err)
	}
	if cfg.Env, err = environment(b.env); err != nil {
		return image.Config{}, err
	}
	if cfg.Labels, err = labelSet(b.version, b.labels); err != nil {
		return image.Config{}, err
	}
	return cfg, nil
}

// sourceDateEpoch is the time written into the image: SOURCE_DATE_EPOCH, or the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		created = time.Unix(sec, 0)
	}
	return created, nil
}

// assemble builds the image the flags describe.
func (b *buildFlags) assemble() (v1.Image, error) {
	created, err := sourceDateEpoch()
	if err != nil {
		return nil, err
	}
	cfg, err := b.config(created)
	if err != nil {
		return nil, err
	}
	layers, err := b.layers()
	if err != nil {
		return nil, err
	}
	return image.Build(layers, cfg)
}

func build(args []string) error {
	b, err := parseBuildFlags(args)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(b.tag)
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	img, err := b.assemble()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.output), 0o755); err != nil {
		return err
	}
	tmp := b.output + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", b.output, err)
	}
	if err := os.Rename(tmp, b.output); err != nil {
		return err
	}
	return report(ref, img, b.output)
}

func report(ref name.Tag, img v1.Image, output string) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var compressed, uncompressed int64
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return err
		}
		compressed += size
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
		uncompressed += n
	}
	st, err := os.Stat(output)
	if err != nil {
		return err
	}
	fmt.Printf("image: %s\n", ref.Name())
	fmt.Printf("image: written to %s (%s)\n", output, mib(st.Size()))
	fmt.Printf("image: manifest digest %s\n", digest)
	fmt.Printf("image: image id (config digest) %s\n", id)
	fmt.Printf("image: %d layers, %s compressed, %s uncompressed\n", len(layers), mib(compressed), mib(uncompressed))
	return nil
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

func unpack(args []string) error {
	fl := flag.NewFlagSet("unpack", flag.ExitOnError)
	imageFile := fl.String("image", "", "docker-archive tarball")
	dir := fl.String("dir", "", "directory to write the flattened filesystem into")
	_ = fl.Parse(args)
	if *imageFile == "" || *dir == "" {
		return errors.New("unpack: --image and --dir are required")
	}
	img, err := tarball.ImageFromPath(*imageFile, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", *imageFile, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		rel := filepath.Clean(strings.TrimPrefix(hdr.Name, "/"))
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		target := filepath.Join(*dir, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("extract: %s: unsupported type %c", hdr.Name, hdr.Typeflag)
		}
	}
}
