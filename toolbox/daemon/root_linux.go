package daemon

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

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

// create opens p for writing, creating it (mode before the umask) or
// truncating it; a symbolic link is followed inside the root.
func (r *fsRoot) create(p string, mode fs.FileMode) (*os.File, error) {
	return r.open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, unixMode(mode))
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
