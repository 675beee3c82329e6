package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An fsRoot resolves the sandbox's paths inside a folder, by descriptor
// (see root.go). Where openat2 is missing (ENOSYS: Linux before 5.6) it
// fails closed: every path gives errNoOpenat2, so the server never falls
// back to a resolution that could leave the root.
type fsRoot struct {
	dir string   // the root, as the server's own file system names it
	f   *os.File // an O_PATH descriptor of it, open for the server's life
}

// resolveFlags are how every sandbox path is resolved from the root.
const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// openRoot opens the folder dir as a server's root.
func openRoot(dir string) (*fsRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("daemon: opening the root %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: finding the root %s: %w", dir, err)
	}
	return &fsRoot{dir: real, f: f}, nil
}

// hostPath returns the path, on the server's own file system, of the
// folder p resolved inside the root: the kernel's name of the folder
// (no symbolic link in it), checked to lie inside the root. It is for
// code that takes path strings (go-git): what they resolve is the folder
// found here unless the sandbox swaps one of its parents for a link
// between this call and theirs.
func (r *fsRoot) hostPath(p string) (string, error) {
	d, err := r.open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer d.Close()
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(d.Fd())))
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: err}
	}
	if real != r.dir && !strings.HasPrefix(real, strings.TrimSuffix(r.dir, "/")+"/") {
		return "", &fs.PathError{Op: "open", Path: p, Err: errMagicLink}
	}
	return real, nil
}

func (r *fsRoot) fd() int { return int(r.f.Fd()) }

// openat2 opens p from dirfd with how, retrying while the kernel asks to
// (EAGAIN: a rename raced the resolution) or a signal interrupts.
func openat2(dirfd int, p string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, p, how)
		if (err == unix.EAGAIN || err == unix.EINTR) && i < 64 {
			continue
		}
		switch err {
		case nil:
			return fd, nil
		case unix.ENOSYS:
			return -1, errNoOpenat2
		case unix.ELOOP, unix.EXDEV:
			return -1, &fs.PathError{Op: "openat2", Path: p, Err: errMagicLink}
		}
		return -1, &fs.PathError{Op: "openat2", Path: p, Err: err}
	}
}

// open opens the sandbox path p (absolute, cleaned) inside the root with
// the open(2) flags and mode, following symbolic links inside the root.
func (r *fsRoot) open(p string, flags int, mode uint32) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolveFlags}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(mode)
	}
	fd, err := openat2(r.fd(), p, &how)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openParent opens the folder of p inside the root (O_PATH) and returns
// it with p's last name, for the *at system calls; the root itself has
// no parent (EINVAL).
func (r *fsRoot) openParent(p string) (*os.File, string, error) {
	dir, name := splitPath(p)
	if name == "" {
		return nil, "", &fs.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	d, err := r.open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return d, name, nil
}

// stat describes p, following symbolic links inside the root.
func (r *fsRoot) stat(p string) (fs.FileInfo, error) {
	f, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fstatInfo(int(f.Fd()), path.Base(p))
}

// lstat describes p without following its last name.
func (r *fsRoot) lstat(p string) (fs.FileInfo, error) {
	if p == "/" {
		return r.stat(p)
	}
	d, name, err := r.openParent(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return lstatAt(int(d.Fd()), name, p)
}

// lstatAt describes the entry name of the folder dirfd, not following it.
func lstatAt(dirfd int, name, p string) (fs.FileInfo, error) {
	fi := &statInfo{name: name}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	fi.setFrom(&st)
	return fi, nil
}

func fstatInfo(fd int, name string) (fs.FileInfo, error) {
	fi := &statInfo{name: name}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	fi.setFrom(&st)
	return fi, nil
}

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

// create opens p for writing, creating it (mode before the umask) or
// truncating it; a symbolic link is followed inside the root.
func (r *fsRoot) create(p string, mode fs.FileMode) (*os.File, error) {
	return r.open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, unixMode(mode))
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

// chown changes the owner and group of p (-1: unchanged), following links
// inside the root.
func (r *fsRoot) chown(p string, uid, gid int) error {
	f, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fchownat(int(f.Fd()), "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return &fs.PathError{Op: "chown", Path: p, Err: err}
	}
	return nil
}

// chmod changes the mode of p, following links inside the root.
func (r *fsRoot) chmod(p string, mode fs.FileMode) error {
	f, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fchmodPath(int(f.Fd()), unixMode(mode)); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	return nil
}

// fchmodPath changes the mode of the file an O_PATH descriptor holds:
// fchmodat2(AT_EMPTY_PATH) where the kernel has it (6.6), else chmod of
// /proc/self/fd/N, the server's own descriptor, whose target is the file
// already resolved inside the root.
func fchmodPath(fd int, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if err != unix.ENOSYS && err != unix.EINVAL && err != unix.EOPNOTSUPP {
		return err
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}

// openRead opens p for reading through a descriptor (O_NONBLOCK: a FIFO
// does not wait for a writer), following links inside the root.
func (r *fsRoot) openRead(p string) (*os.File, error) {
	return r.open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
}

// resolveLinks follows the symbolic links of p's last name inside the
// root, each by descriptor, and returns the folder holding the file they
// lead to (O_PATH), its name there and its sandbox path.
func (r *fsRoot) resolveLinks(p string) (*os.File, string, string, error) {
	for range 40 {
		d, name, err := r.openParent(p)
		if err != nil {
			return nil, "", "", err
		}
		fi, err := lstatAt(int(d.Fd()), name, p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if err != nil {
				d.Close()
				return nil, "", "", err
			}
			return d, name, p, nil
		}
		target, err := readlinkAt(int(d.Fd()), name)
		d.Close()
		if err != nil {
			return nil, "", "", &fs.PathError{Op: "readlink", Path: p, Err: err}
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		p = path.Clean("/" + target)
	}
	return nil, "", "", &fs.PathError{Op: "open", Path: p, Err: errMagicLink}
}

func readlinkAt(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(buf[:m]), nil
		}
	}
}

// statfs describes the file system of p, followed inside the root.
func (r *fsRoot) statfs(p string) (*syscall.Statfs_t, error) {
	f, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return nil, &fs.PathError{Op: "statfs", Path: p, Err: err}
	}
	return &st, nil
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

// sandboxPath returns the sandbox path of host, a path on the server's
// own file system (as hostPath gives), or false when it is not under the
// root.
func (r *fsRoot) sandboxPath(host string) (string, bool) {
	if r.dir == "/" {
		return host, path.IsAbs(host)
	}
	if host == r.dir {
		return "/", true
	}
	rest, ok := strings.CutPrefix(host, r.dir+"/")
	return path.Clean("/" + rest), ok
}

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

// openDirFor opens the folder p (O_PATH) for a command to start in.
func (r *fsRoot) openDirFor(p string) (*os.File, error) {
	return r.open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
}

// commandDir returns what a child's exec.Cmd.Dir is to be for it to start
// in the folder d, already resolved inside the root: /proc/self/fd/N of d.
// This is complete: the child chdirs between fork and exec (Go's
// forkAndExecInChild, before it moves any descriptor), when it still holds
// every descriptor of the server, so /proc/self/fd/N is the folder d holds
// whatever the sandbox did to the path since; /proc is the sandbox's own
// procfs mount, which its processes cannot change (no CAP_SYS_ADMIN), and
// /proc/self names the child itself (the kernel lets a process follow its
// own fd links whatever its uid).
func commandDir(d *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))
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

// statInfo is the fs.FileInfo of a stat taken by descriptor.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *statInfo) setFrom(st *unix.Stat_t) {
	fi.st = syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
		Rdev: st.Rdev, Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec(st.Atim), Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}
}

func (fi *statInfo) Name() string { return fi.name }
func (fi *statInfo) Size() int64  { return fi.st.Size }
func (fi *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if fi.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
func (fi *statInfo) ModTime() time.Time {
	return time.Unix(int64(fi.st.Mtim.Sec), int64(fi.st.Mtim.Nsec))
}
func (fi *statInfo) IsDir() bool { return fi.Mode().IsDir() }
func (fi *statInfo) Sys() any    { return &fi.st }

// sameFile reports whether a and b describe the same file.
func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// unixMode turns a FileMode's permission and special bits into the bits
// of chmod(2).
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= syscall.S_ISVTX
	}
	return u
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
