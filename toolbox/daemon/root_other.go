//go:build !linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
)

// An fsRoot outside Linux resolves paths as the operating system does,
// with no containment: there is no openat2, and no sandbox runs on these
// systems (the local engine is Linux's), so the server serves its host's
// own files. openRoot therefore accepts only "/" as the root, so that no
// caller believes a server confined to another folder.
type fsRoot struct{ dir string }

func openRoot(dir string) (*fsRoot, error) {
	if filepath.Clean(dir) != "/" {
		return nil, fmt.Errorf("daemon: root %q: only / is supported outside Linux (confining paths to a folder needs openat2)", dir)
	}
	return &fsRoot{dir: "/"}, nil
}

func (r *fsRoot) stat(p string) (fs.FileInfo, error)  { return os.Stat(p) }
func (r *fsRoot) lstat(p string) (fs.FileInfo, error) { return os.Lstat(p) }
func (r *fsRoot) openRead(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
func (r *fsRoot) create(p string, mode fs.FileMode) (*os.File, error) {
	return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
}
func (r *fsRoot) mkdirAll(p string, mode fs.FileMode) error { return os.MkdirAll(p, mode) }
func (r *fsRoot) remove(p string) error                     { return os.Remove(p) }
func (r *fsRoot) removeAll(p string) error                  { return os.RemoveAll(p) }
func (r *fsRoot) chown(p string, uid, gid int) error        { return os.Chown(p, uid, gid) }
func (r *fsRoot) chmod(p string, mode fs.FileMode) error    { return os.Chmod(p, mode) }
func (r *fsRoot) openDirFor(p string) (*os.File, error)     { return os.Open(p) }
func (r *fsRoot) hostPath(p string) (string, error)         { return p, nil }

func (r *fsRoot) sandboxPath(host string) (string, bool) { return host, filepath.IsAbs(host) }

func (r *fsRoot) writeFileAtomic(p string, data []byte, mode fs.FileMode) error {
	tmp := p + ".tmp-" + randomHex(6)
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func (r *fsRoot) statfs(p string) (*syscall.Statfs_t, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func (r *fsRoot) mkdir(p string, mode fs.FileMode, existOK bool) error {
	err := os.Mkdir(p, mode)
	if existOK && errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

func (r *fsRoot) openLast(p string, flags int, mode fs.FileMode) (*os.File, error) {
	return os.OpenFile(p, flags|syscall.O_NOFOLLOW, mode)
}

func (r *fsRoot) writeFile(p string, data []byte, mode fs.FileMode) error {
	return os.WriteFile(p, data, mode)
}

func (r *fsRoot) readDirNames(p string, n int) ([]string, error) {
	d, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return dirNames(d, n)
}

func (r *fsRoot) emptyDir(p string) {
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(p, e.Name()))
	}
}
func commandDir(d *os.File) string                 { return d.Name() }
func sameFile(a, b fs.FileInfo) bool               { return os.SameFile(a, b) }
func removeAtName(dir *os.File, name string) error { return os.Remove(filepath.Join(dir.Name(), name)) }
func renameAtNames(dir *os.File, from, to string) error {
	return os.Rename(filepath.Join(dir.Name(), from), filepath.Join(dir.Name(), to))
}
func openAt(dir *os.File, name, p string) (*os.File, error) {
	return os.Open(filepath.Join(dir.Name(), name))
}

func (r *fsRoot) rename(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return &fs.PathError{Op: "rename", Path: dst, Err: fs.ErrExist}
	}
	return os.Rename(src, dst)
}

// resolveLinks returns the folder of the file p leads to, its name there
// and its path.
func (r *fsRoot) resolveLinks(p string) (*os.File, string, string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, "", "", err
	}
	d, err := os.Open(filepath.Dir(real))
	if err != nil {
		return nil, "", "", err
	}
	return d, filepath.Base(real), real, nil
}

func createTempAt(dir *os.File, prefix string) (*os.File, string, error) {
	f, err := os.CreateTemp(dir.Name(), prefix+"*")
	if err != nil {
		return nil, "", err
	}
	return f, filepath.Base(f.Name()), nil
}

// walk is the Linux walk's equivalent through path strings.
func (r *fsRoot) walk(ctx context.Context, p string, o walkOptions, fn func(e walkEntry) error) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fn(walkEntry{path: p, info: fi, open: func() (*os.File, error) { return r.openRead(p) }})
	}
	return walkDirPath(ctx, p, 1, o, fn)
}

func walkDirPath(ctx context.Context, p string, depth int, o walkOptions, fn func(e walkEntry) error) error {
	f, err := os.Open(p)
	if err != nil {
		return &fs.PathError{Op: "readdir", Path: p, Err: err}
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return &fs.PathError{Op: "readdir", Path: p, Err: err}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		ep := path.Join(p, name)
		fi, err := os.Lstat(ep)
		if err != nil {
			continue
		}
		if err := fn(walkEntry{path: ep, info: fi, depth: depth, open: func() (*os.File, error) { return os.Open(ep) }}); err != nil {
			return err
		}
		if !fi.IsDir() || (o.maxDepth > 0 && depth >= o.maxDepth) {
			continue
		}
		var pe *fs.PathError
		if err := walkDirPath(ctx, ep, depth+1, o, fn); err != nil && !(errors.As(err, &pe) && pe.Op == "readdir") {
			return err
		}
	}
	return nil
}
