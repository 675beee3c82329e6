package daemon

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Replacing a file whole: a temporary file in its folder, renamed over
// it by descriptor.

// writeFileAtomic replaces the file p (a last link followed inside the
// root, not replaced) with data: a new file in p's folder, renamed over
// p by descriptor.
func (r *fsRoot) writeFileAtomic(p string, data []byte, mode fs.FileMode) error {
	d, name, q, err := r.resolveLinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		// No such file (or a dangling link): made as p.
		d, name, err = r.openParent(p)
		q = p
	}
	if err != nil {
		return err
	}
	defer d.Close()
	p = q
	f, tmp, err := createTempAt(d, "."+name+".tmp-")
	if err != nil {
		return &fs.PathError{Op: "create", Path: p, Err: err}
	}
	_, err = f.Write(data)
	if err == nil {
		err = unix.Fchmod(int(f.Fd()), unixMode(mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameAtNames(d, tmp, name)
	}
	if err != nil {
		_ = removeAtName(d, tmp)
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

// createTempAt creates a new file named prefix and a random suffix in the
// folder dir, mode 0600.
func createTempAt(dir *os.File, prefix string) (*os.File, string, error) {
	for range 100 {
		name := prefix + randomHex(6)
		fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return os.NewFile(uintptr(fd), name), name, nil
	}
	return nil, "", fs.ErrExist
}

// removeAtName unlinks the file name of the folder dir.
func removeAtName(dir *os.File, name string) error {
	return unix.Unlinkat(int(dir.Fd()), name, 0)
}

// renameAtNames renames the entry from of the folder dir to to.
func renameAtNames(dir *os.File, from, to string) error {
	return unix.Renameat(int(dir.Fd()), from, int(dir.Fd()), to)
}
