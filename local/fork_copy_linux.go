package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/internal/disk"
)

// idShift maps the host owner id of a file being copied to its owner in
// the copy.
type idShift func(id uint32) int

// shiftToZero maps the ids of the range ids to 0-based ones and others to
// 0: a snapshot's layer is owned as in an image.
func shiftToZero(ids *idRange) idShift {
	return func(id uint32) int {
		if ids != nil && int(id) >= ids.First && int(id) < ids.First+ids.Count {
			return int(id) - ids.First
		}
		return 0
	}
}

// shiftRange maps the ids of the range from to the same place in the
// range to (a fork's own) and leaves others as they are.
func shiftRange(from, to *idRange) idShift {
	return func(id uint32) int {
		if from != nil && to != nil && int(id) >= from.First && int(id) < from.First+from.Count && int(id)-from.First < to.Count {
			return int(id) - from.First + to.First
		}
		return int(id)
	}
}

// keepID leaves owners as they are.
func keepID(id uint32) int { return int(id) }

// treeCopy is one copy of a folder tree (copyTree).
type treeCopy struct {
	src, dst string
	shift    idShift
	// xattr says which extended attributes are copied.
	xattr func(name string) bool
	// skip leaves out the entry rel (and what it holds) of src.
	skip func(rel string) bool

	// root is a descriptor of src: files are opened beneath it without
	// following any link, so a folder the sandbox swaps for a link
	// during the copy (a source in use) never leads outside src.
	root int

	wg   sync.WaitGroup
	sem  chan struct{}
	mu   sync.Mutex
	errs []error
	dirs []string // the folders copied, parents first
	// seen holds the copy of each file with several links met so far;
	// links the later names of those files, linked to it once the
	// copies are done. The copy keeps the source's hard links: a
	// sandbox's file linked 60,000 times is one file in a layer or a
	// fork, not 60,000 copies of it filling the host's disk.
	seen  map[fileID]string
	links []hardLink
}

// fileID names a file of the source: its device and inode.
type fileID struct{ dev, ino uint64 }

// hardLink is a later name dst of the file copied to first.
type hardLink struct{ first, dst string }

// copyTree copies the folder src into dst (made when missing): folders,
// regular files (holes and hard links kept), symbolic links and whiteouts (0/0 character
// devices), with their modes, times, owners mapped by t.shift and the
// xattrs t.xattr names. Sockets, FIFOs and other devices are left out.
// Files are copied by several workers at once; the folders' own metadata
// is set last, so that their times are the source's.
func (t *treeCopy) run() error {
	t.sem = make(chan struct{}, max(4, 2*runtime.NumCPU()))
	root, err := unix.Open(t.src, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: t.src, Err: err}
	}
	defer unix.Close(root)
	t.root = root
	walkErr := filepath.WalkDir(t.src, t.visit)
	t.wg.Wait()
	if err := errors.Join(append(t.errs, walkErr)...); err != nil {
		return err
	}
	for _, l := range t.links {
		if err := os.Link(l.first, l.dst); err != nil {
			return err
		}
	}
	for _, rel := range slices.Backward(t.dirs) {
		var sys unix.Stat_t
		p := filepath.Join(t.src, rel)
		if err := unix.Lstat(p, &sys); err != nil {
			return err
		}
		if err := t.copyMeta(p, filepath.Join(t.dst, rel), &sys); err != nil {
			return err
		}
	}
	return nil
}

// visit copies the entry p of the walk of t.src.
func (t *treeCopy) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(t.src, p)
	if rel != "." && t.skip != nil && t.skip(rel) {
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	}
	dst := filepath.Join(t.dst, rel)
	switch mode := d.Type(); {
	case mode.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil && !(rel == "." && errors.Is(err, fs.ErrExist)) {
			return err
		}
		t.dirs = append(t.dirs, rel)
		return nil
	case mode.IsRegular():
		if t.laterLink(d, dst) {
			return nil
		}
		t.sem <- struct{}{}
		t.wg.Go(func() {
			defer func() { <-t.sem }()
			if err := t.copyEntry(p, dst, func(_, dst string) error { return t.copyBeneath(rel, dst) }); err != nil {
				t.mu.Lock()
				t.errs = append(t.errs, err)
				t.mu.Unlock()
			}
		})
		return nil
	case mode&fs.ModeSymlink != 0:
		return t.copyEntry(p, dst, func(src, dst string) error {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			return err
		})
	case mode&fs.ModeCharDevice != 0:
		return t.copyEntry(p, dst, func(src, dst string) error {
			var sys unix.Stat_t
			if err := unix.Lstat(src, &sys); err != nil || sys.Rdev != 0 {
				return err // a device other than a whiteout stays behind
			}
			return unix.Mknod(dst, unix.S_IFCHR, 0)
		})
	}
	return nil
}

// copyBeneath copies the regular file rel of t.src to the new file dst,
// holes kept, opening it beneath t.root with no link followed on the way
// (an error instead), without waiting on a FIFO.
func (t *treeCopy) copyBeneath(rel, dst string) error {
	fd, err := unix.Openat2(t.root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return &os.PathError{Op: "open beneath the copy's source", Path: filepath.Join(t.src, rel), Err: err}
	}
	in := os.NewFile(uintptr(fd), filepath.Join(t.src, rel))
	defer in.Close()
	return disk.CopyFile(dst, in)
}

// laterLink reports whether the regular file d of the source is a later
// name of a file with several links met before, and then notes dst to be
// linked to that file's copy.
func (t *treeCopy) laterLink(d fs.DirEntry, dst string) bool {
	info, err := d.Info()
	if err != nil {
		return false // the copy reports it
	}
	sys, ok := info.Sys().(*syscall.Stat_t)
	if !ok || sys.Nlink < 2 {
		return false
	}
	id := fileID{dev: uint64(sys.Dev), ino: sys.Ino}
	if first, ok := t.seen[id]; ok {
		t.links = append(t.links, hardLink{first: first, dst: dst})
		return true
	}
	if t.seen == nil {
		t.seen = map[fileID]string{}
	}
	t.seen[id] = dst
	return false
}

// copyEntry makes dst as a copy of src with mk, then gives it src's
// metadata.
func (t *treeCopy) copyEntry(src, dst string, mk func(src, dst string) error) error {
	if err := mk(src, dst); err != nil {
		return err
	}
	var sys unix.Stat_t
	if err := unix.Lstat(src, &sys); err != nil {
		return err
	}
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return nil // left out
	}
	return t.copyMeta(src, dst, &sys)
}

// copyMeta gives dst the xattrs t.xattr names, the owner (mapped by
// t.shift), mode and times of src, whose lstat is sys.
func (t *treeCopy) copyMeta(src, dst string, sys *unix.Stat_t) error {
	if err := copyXattrs(src, dst, t.xattr); err != nil {
		return err
	}
	return setMeta(dst, sys, t.shift)
}

// setMeta gives dst the owner of sys (mapped by shift), then its mode
// (which a chown clears the set-id bits of) and times.
func setMeta(dst string, sys *unix.Stat_t, shift idShift) error {
	if err := os.Lchown(dst, shift(sys.Uid), shift(sys.Gid)); err != nil {
		return err
	}
	if sys.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Fchmodat(unix.AT_FDCWD, dst, sys.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{sys.Atim, sys.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// snapshotXattr names the xattrs a snapshot's layer keeps: overlayfs's
// opaque mark and user.* ones. Others (security.capability, which names
// the sandbox's root, overlayfs's origin and index records) stay behind.
func snapshotXattr(name string) bool {
	return name == "trusted.overlay.opaque" || strings.HasPrefix(name, "user.")
}

// forkXattr names the xattrs a fork's copy keeps: overlayfs's (its
// layers are the source's) and user.* ones. security.capability names
// the source's root and stays behind.
func forkXattr(name string) bool {
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.")
}
