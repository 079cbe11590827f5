// Package image turns a set of files into a reproducible container image, with
// go-containerregistry. It is the pure part of `make image` (hack/image.sh) and of
// `make cluster-images` (hack/cluster-images.sh, the test cluster's images); the
// command cmd/kproxy-image feeds it and writes the result. The product binary does not
// import it.
//
// Contract:
//
//   - A File is a path in the image (absolute, cleaned), a mode (permission bits and
//     fs.ModeSticky, plus fs.ModeDir or fs.ModeSymlink for those kinds), and either
//     content (a regular file) or a link target (a symlink). Nothing else about the
//     file is taken: not its owner, times, or where it came from on the build host.
//   - Tar writes the files as one uncompressed tar stream sorted by path (bytewise),
//     with every parent directory present (mode 0755 when not given), owner and group
//     0 with empty names, and every time set to the given one (the Unix epoch when
//     zero). The same files and time give the same bytes, and so the same digest,
//     whatever order they were given in. Layer is that stream gzip-compressed (by
//     go-containerregistry, deterministic for one version of it).
//   - Build stacks layers on an empty image with the given configuration (os linux,
//     the architecture, entrypoint, cmd, environment, user, working directory,
//     labels; the empty ones are left out of the config) and the given time as the
//     creation time of the image and of each history entry. The same inputs give the
//     same config and manifest digests.
//   - Duplicate paths in one layer, relative or unclean paths, "/", a non-directory
//     parent, setuid/setgid bits and other file types (devices, FIFOs) are errors.
package image
