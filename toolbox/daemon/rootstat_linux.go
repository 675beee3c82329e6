package daemon

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Descriptions of files stat(2) gives by descriptor, as fs.FileInfo, and
// file modes as chmod(2) takes them.

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
