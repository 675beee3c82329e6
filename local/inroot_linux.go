package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host code acting on a sandbox's files (its writable root, its upper
// folders, the mount points made for volumes and bucket mounts) resolves
// every path inside the sandbox's root, never through what the sandbox
// planted there: a symbolic link (even an absolute one, or one through
// /proc/*/root) resolves as it would for the sandbox, beneath the root;
// magic links are refused; a FIFO or a device is never opened for
// reading or writing. The helpers here are the only way such code opens
// a sandbox's file.

// inRoot are the resolve flags of a path inside a sandbox's root.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// openInRoot opens path (a path inside the sandbox, absolute or not) in
// the root folder root with flags (O_CLOEXEC added), resolving it as
// the sandbox would: beneath root.
func openInRoot(root int, path string, flags int) (int, error) {
	p := strings.TrimLeft(path, "/")
	if p == "" {
		p = "."
	}
	for {
		fd, err := unix.Openat2(root, p, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: inRoot})
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue // a rename raced the lookup
		}
		return fd, err
	}
}

// readFileInRoot reads at most max bytes of the regular file path in the
// root folder root (resolved as openInRoot does). A FIFO, socket or
// device there is an error, never waited on; a missing file is an error
// matching fs.ErrNotExist.
func readFileInRoot(root int, path string, max int64) ([]byte, error) {
	fd, err := openInRoot(root, path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (file type %#o, e.g. a FIFO or a device): the sandbox replaced it; make it a regular file again", st.Mode&unix.S_IFMT)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// mkdirAllInRoot makes the folder path (a path inside the sandbox) and
// its missing parents in the root folder root, each with mode perm and,
// when uid >= 0, owned by uid and gid, resolving path as the sandbox
// would (beneath root). A link to a missing folder has its target made
// (inside the root, as for the sandbox). It returns an O_PATH descriptor
// of the folder and whether it made it. A component that is not a folder
// is an error.
func mkdirAllInRoot(root int, path string, perm uint32, uid, gid int) (fd int, made bool, err error) {
	return mkdirAllDepth(root, path, perm, uid, gid, 0)
}

// maxLinks is how many links mkdirAllInRoot follows to missing folders,
// as the kernel's limit on a lookup.
const maxLinks = 40

func mkdirAllDepth(root int, path string, perm uint32, uid, gid, depth int) (fd int, made bool, err error) {
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, false, err
	}
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s != "" && s != "." {
			segs = append(segs, s)
		}
	}
	for i, seg := range segs {
		made = false
		prefix := strings.Join(segs[:i+1], "/")
		next, err := openInRoot(root, prefix, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) && seg != ".." {
			var st unix.Stat_t
			if unix.Fstatat(cur, seg, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				next, err = mkdirLinkTarget(root, cur, segs[:i], seg, perm, uid, gid, depth)
			} else {
				next, made, err = mkdirBeneath(cur, seg, perm, uid, gid)
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, false, &os.PathError{Op: "mkdir", Path: "/" + prefix, Err: err}
		}
		cur = next
	}
	return cur, made, nil
}

// mkdirBeneath makes the folder name in the folder dir, never through a
// link (one planted meanwhile fails it), and returns an O_PATH
// descriptor of it and whether it made it.
func mkdirBeneath(dir int, name string, perm uint32, uid, gid int) (int, bool, error) {
	made := false
	if err := unix.Mkdirat(dir, name, perm); err == nil {
		made = true
	} else if !errors.Is(err, unix.EEXIST) {
		return -1, false, err
	}
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, false, err
	}
	if made && uid >= 0 {
		if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			unix.Close(fd)
			return -1, false, err
		}
	}
	return fd, made, nil
}

// mkdirLinkTarget makes the missing target of the link name, in the
// folder dir at parents inside the root, and returns an O_PATH
// descriptor of it.
func mkdirLinkTarget(root, dir int, parents []string, name string, perm uint32, uid, gid, depth int) (int, error) {
	if depth >= maxLinks {
		return -1, unix.ELOOP
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return -1, err
	}
	target := string(buf[:n])
	if !strings.HasPrefix(target, "/") {
		target = "/" + strings.Join(append(append([]string(nil), parents...), target), "/")
	}
	fd, _, err := mkdirAllDepth(root, filepath.Clean(target), perm, uid, gid, depth+1)
	return fd, err
}

// fdPath returns the path naming the descriptor fd in /proc/self/fd:
// opening or mounting on it reaches the very file, not a path.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
