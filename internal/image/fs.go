package image

import (
	"fmt"
	"io/fs"
	"path"
)

// FromFS returns the files of fsys (directories, regular files and symlinks) as Files
// under prefix (absolute, e.g. "/"). Only their paths, permission bits, contents and
// link targets are taken. fsys must implement fs.ReadLinkFS when it holds symlinks
// (os.DirFS does).
func FromFS(fsys fs.FS, prefix string) ([]File, error) {
	var files []File
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: path.Join(prefix, p), Mode: info.Mode() & (fs.ModePerm | fs.ModeSticky)}
		switch t := info.Mode().Type(); {
		case t == fs.ModeDir:
			f.Mode |= fs.ModeDir
		case t == fs.ModeSymlink:
			f.Mode |= fs.ModeSymlink
			if f.Link, err = fs.ReadLink(fsys, p); err != nil {
				return err
			}
		case t == 0:
			if f.Content, err = fs.ReadFile(fsys, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, t)
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("image: reading files: %w", err)
	}
	return files, nil
}
