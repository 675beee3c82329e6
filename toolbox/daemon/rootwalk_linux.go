package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// Walks over folders inside the root, from descriptor to descriptor.

// readDirNames returns up to n (n <= 0: all) names of the folder p,
// followed inside the root.
func (r *fsRoot) readDirNames(p string, n int) ([]string, error) {
	d, err := r.open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return dirNames(d, n)
}

// emptyDir removes what the folder p (followed inside the root) holds,
// going from descriptor to descriptor and never following a link.
func (r *fsRoot) emptyDir(p string) {
	d, err := r.open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		_ = removeAllAt(int(d.Fd()), n)
	}
}

// walk calls fn for every entry under the folder p in lexical order
// (pre-order), or for p itself when it is not a folder; links under p
// are reported, never followed (p itself may be one, followed inside the
// root). Each folder is opened from its parent's descriptor, by name,
// with O_NOFOLLOW, so no joined path string is ever resolved again.
// Unreadable folders under p are skipped. It stops when ctx is done or
// fn fails.
func (r *fsRoot) walk(ctx context.Context, p string, o walkOptions, fn func(e walkEntry) error) error {
	f, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := fstatInfo(int(f.Fd()), path.Base(p))
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fn(walkEntry{path: p, info: fi, open: func() (*os.File, error) {
			return r.openRead(p)
		}})
	}
	fd, err := unix.Openat(int(f.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	return walkDir(ctx, d, p, 1, o, fn)
}

func walkDir(ctx context.Context, dir *os.File, p string, depth int, o walkOptions, fn func(e walkEntry) error) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return &fs.PathError{Op: "readdir", Path: p, Err: err}
	}
	slices.Sort(names)
	dirfd := int(dir.Fd())
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		ep := path.Join(p, name)
		fi, err := lstatAt(dirfd, name, ep)
		if err != nil {
			continue // removed meanwhile
		}
		e := walkEntry{path: ep, info: fi, depth: depth, open: func() (*os.File, error) {
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: ep, Err: err}
			}
			return os.NewFile(uintptr(fd), ep), nil
		}}
		if err := fn(e); err != nil {
			return err
		}
		if !fi.IsDir() || (o.maxDepth > 0 && depth >= o.maxDepth) {
			continue
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // unreadable, or no longer a folder
		}
		sub := os.NewFile(uintptr(fd), ep)
		if o.skipPseudo && isPseudoFSFd(fd) {
			sub.Close()
			continue
		}
		err = walkDir(ctx, sub, ep, depth+1, o, fn)
		sub.Close()
		if err != nil && !isSkippable(err) {
			return err
		}
	}
	return nil
}

// isSkippable reports whether a folder's walk failed only because it
// could not be read.
func isSkippable(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "readdir"
}

// isPseudoFSFd is isPseudoFS for an open folder.
func isPseudoFSFd(fd int) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return false
	}
	return isPseudoFSType(uint32(st.Type))
}
