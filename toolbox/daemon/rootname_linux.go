package daemon

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Operations on the last name of a path: its folder is opened inside the
// root (fsRoot.openParent) and the name acted on with the *at system
// calls, without following it.

// mkdirAll makes the folder p and its missing parents inside the root,
// with mode (before the umask), as os.MkdirAll does.
func (r *fsRoot) mkdirAll(p string, mode fs.FileMode) error {
	fi, err := r.stat(p)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir, name := splitPath(p)
	if name == "" {
		return err
	}
	if err := r.mkdirAll(dir, mode); err != nil {
		return err
	}
	return r.mkdir(p, mode, true)
}

// mkdir makes the folder p inside the root; with existOK an existing
// folder is no error.
func (r *fsRoot) mkdir(p string, mode fs.FileMode, existOK bool) error {
	d, name, err := r.openParent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Mkdirat(int(d.Fd()), name, unixMode(mode)); err != nil {
		if err == unix.EEXIST && existOK {
			if fi, serr := lstatAt(int(d.Fd()), name, p); serr == nil && fi.IsDir() {
				return nil
			}
		}
		return &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return nil
}

// remove removes the file, link or empty folder p (a link, not its
// target).
func (r *fsRoot) remove(p string) error {
	d, name, err := r.openParent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := removeAt(int(d.Fd()), name); err != nil {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		if derr := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); derr == nil || derr != unix.ENOTDIR {
			return derr
		}
	}
	return err
}

// removeAll removes p and, for a folder, everything under it, going from
// descriptor to descriptor and never following a link.
func (r *fsRoot) removeAll(p string) error {
	d, name, err := r.openParent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := removeAllAt(int(d.Fd()), name); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

func removeAllAt(dirfd int, name string) error {
	err := removeAt(dirfd, name)
	if err == nil || err == unix.ENOENT || (err != unix.ENOTEMPTY && err != unix.EEXIST) {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	for {
		names, rerr := f.Readdirnames(256)
		for _, n := range names {
			if err := removeAllAt(fd, n); err != nil && err != unix.ENOENT {
				f.Close()
				return err
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
		// Entries were removed: read the folder from its start again.
		if _, err := f.Seek(0, 0); err != nil {
			break
		}
	}
	f.Close()
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// rename renames src to dst, which must not exist (fs.ErrExist).
func (r *fsRoot) rename(src, dst string) error {
	sd, sname, err := r.openParent(src)
	if err != nil {
		return err
	}
	defer sd.Close()
	dd, dname, err := r.openParent(dst)
	if err != nil {
		return err
	}
	defer dd.Close()
	err = unix.Renameat2(int(sd.Fd()), sname, int(dd.Fd()), dname, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		// A file system without RENAME_NOREPLACE: check, then rename.
		if _, serr := lstatAt(int(dd.Fd()), dname, dst); serr == nil {
			return &fs.PathError{Op: "rename", Path: dst, Err: fs.ErrExist}
		}
		err = unix.Renameat(int(sd.Fd()), sname, int(dd.Fd()), dname)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// writeFile writes data to the file p, creating it (mode before the
// umask) or truncating it; its last name is not followed (a link there
// is an error), its folder is followed inside the root.
func (r *fsRoot) writeFile(p string, data []byte, mode fs.FileMode) error {
	f, err := r.openLast(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openLast opens p with the open(2) flags and mode (before the umask)
// without following its last name; its folder is followed inside the
// root.
func (r *fsRoot) openLast(p string, flags int, mode fs.FileMode) (*os.File, error) {
	d, name, err := r.openParent(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fd, err := unix.Openat(int(d.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, unixMode(mode))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openAt opens the entry name of the folder dir for reading, not
// following it (p: its sandbox path, for errors).
func openAt(dir *os.File, name, p string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}
