// Command kproxy-image assembles kproxy's container image (make image, hack/image.sh):
//
//	kproxy-image build --rootfs DIR --binary FILE --tag NAME:TAG --version V --output FILE
//	kproxy-image unpack --image FILE --dir DIR
//
// build writes two layers, the distribution's files (DIR, as extracted from the .deb
// files) and the product binary at /usr/local/bin/kube-proxy, as a docker-archive
// tarball (docker load, ctr images import), with the times taken from
// SOURCE_DATE_EPOCH (the Unix epoch when unset), and prints the image's digests and
// sizes. It refuses a binary that is not statically linked. unpack writes the
// flattened filesystem of such a tarball into DIR (the smoke test of make image).
package main

import (
	"archive/tar"
	"debug/elf"
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

const binaryPath = "/usr/local/bin/kube-proxy"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kproxy-image build|unpack [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "unpack":
		err = unpack(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kproxy-image:", err)
		os.Exit(1)
	}
}

func build(args []string) error {
	fl := flag.NewFlagSet("build", flag.ExitOnError)
	rootfs := fl.String("rootfs", "", "directory of the distribution's files")
	binary := fl.String("binary", "", "the static product binary")
	tag := fl.String("tag", "", "image name and tag")
	version := fl.String("version", "", "kproxy's version (label)")
	output := fl.String("output", "", "docker-archive tarball to write")
	_ = fl.Parse(args)
	if *rootfs == "" || *binary == "" || *tag == "" || *version == "" || *output == "" {
		return errors.New("build: --rootfs, --binary, --tag, --version and --output are required")
	}
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		created = time.Unix(sec, 0)
	}
	if err := checkStatic(*binary); err != nil {
		return err
	}
	base, err := image.FromFS(os.DirFS(*rootfs), "/")
	if err != nil {
		return err
	}
	content, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	product := []image.File{{Path: binaryPath, Mode: 0o755, Content: content}}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	img, err := image.Build([][]image.File{base, product}, image.Config{
		Architecture: "amd64",
		Entrypoint:   []string{binaryPath},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "kproxy",
			"org.opencontainers.image.version": *version,
			"io.kproxy.version":                *version,
		},
		Created: created,
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*output), 0o755); err != nil {
		return err
	}
	tmp := *output + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", *output, err)
	}
	if err := os.Rename(tmp, *output); err != nil {
		return err
	}
	return report(ref, img, *output)
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

// checkStatic refuses a binary with an interpreter or shared-library dependencies.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (has an ELF interpreter); build it with CGO_ENABLED=0", file)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v; build it with CGO_ENABLED=0", file, libs)
	}
	return nil
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
