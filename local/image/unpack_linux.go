package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Whiteouts of the OCI layer format, and the overlayfs forms they take in
// an unpacked layer.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."     // aufs bookkeeping; meaningless to overlayfs
	whiteoutOpaque = ".wh..wh..opq" // "hide the lower layers' content of this folder"
	opaqueXattr    = "trusted.overlay.opaque"
	paxXattr       = "SCHILY.xattr."
)

// errEscape reports a path that leaves the layer.
var errEscape = errors.New("path leaves the layer")

// unpacker writes the entries of one layer's tar stream into a folder, in
// overlayfs format, and cannot be made to write anywhere else:
//
//   - names are cleaned; a name or hard-link target with ".." above the
//     layer's root is refused (absolute names are taken relative to it);
//   - every parent folder is opened with openat2(RESOLVE_IN_ROOT), so a
//     symlink of the layer (absolute, or with ".." in it) is followed as it
//     would be inside the sandbox, never to the host's files;
//   - the last component is created with *at calls relative to that
//     folder, without following a symlink (O_NOFOLLOW, O_EXCL); what was
//     there is removed first (a later entry replaces an earlier one);
//   - hard links are made with linkat between two folders opened that way;
//   - `.wh.NAME` becomes a 0/0 character device NAME and `.wh..wh..opq`
//     the trusted.overlay.opaque=y xattr of its folder; a 0/0 character
//     device is kept as the whiteout it is; other device nodes are skipped
//     (a sandbox's /dev comes from the engine), and so are sockets;
//   - only user.* and security.capability xattrs are kept: a trusted.*
//     one (trusted.overlay.redirect, say) would steer overlayfs.
//
// Owners are the tar's numeric uids and gids, so unpacking needs root.
type unpacker struct {
	rootFd    int
	cachedDir string // the folder cachedFd is, "" for none
	cachedFd  int
	dirTimes  []entryTimes
	size      int64
	buf       []byte
	// reserve is the free space of the store's disk that unpacking
	// leaves untouched (see checkSpace).
	reserve int64
}

// checkSpace fails with ErrNoSpace when writing n more bytes would leave
// less than u.reserve free on the disk: a decompression bomb (a layer that
// unpacks to terabytes) stops there rather than fill the host's disk.
func (u *unpacker) checkSpace(n int64) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(u.rootFd, &st); err != nil {
		return nil // no figures: the write's own error will tell
	}
	free := int64(st.Bavail) * st.Bsize
	if u.reserve < 0 {
		// min(1 GiB, 5% of the disk)
		u.reserve = min(1<<30, int64(st.Blocks)*st.Bsize/20)
	}
	if n > free-u.reserve {
		return fmt.Errorf("%w: a file of %d bytes, with %d bytes free on the store's disk of which %d are kept free; free some space (agentbox image prune) or move the state dir", ErrNoSpace, n, free, u.reserve)
	}
	return nil
}

// entryTimes is a folder's times, set once every entry is written (writing
// into a folder changes its mtime).
type entryTimes struct {
	name string
	ts   [2]unix.Timespec
}

// unpack writes the layer tar stream r into the empty folder dst and
// returns the bytes of its files.
func unpack(ctx context.Context, r io.Reader, dst string) (int64, error) {
	fd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dst, err)
	}
	u := &unpacker{rootFd: fd, cachedFd: -1, buf: make([]byte, 256<<10), reserve: -1}
	defer u.close()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("%w: read layer: %w", ErrCorrupt, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return 0, fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
	if err := u.setDirTimes(); err != nil {
		return 0, err
	}
	return u.size, nil
}

func (u *unpacker) close() {
	if u.cachedFd >= 0 {
		unix.Close(u.cachedFd)
	}
	unix.Close(u.rootFd)
}

// cleanName turns a tar name into a path relative to the layer's root, "."
// for the root itself.
func cleanName(name string) (string, error) {
	n := path.Clean("./" + strings.TrimLeft(name, "/"))
	if n == ".." || strings.HasPrefix(n, "../") {
		return "", fmt.Errorf("%w: %q", errEscape, name)
	}
	return n, nil
}

// entry writes one tar entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the layer's root is not a folder", ErrCorrupt)
		}
		return u.rootMeta(hdr)
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	pfd, err := u.parent(dir)
	if err != nil {
		return err
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(pfd, base)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(pfd, name, base, hdr)
	case tar.TypeReg, tar.TypeGNUSparse: // (the reader turns the old TypeRegA into TypeReg)
		return u.file(pfd, base, hdr, r)
	case tar.TypeSymlink:
		if err := u.create(pfd, base, func() error { return unix.Symlinkat(hdr.Linkname, pfd, base) }); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		return u.meta(pfd, base, hdr, false)
	case tar.TypeLink:
		return u.hardlink(pfd, base, hdr)
	case tar.TypeChar, tar.TypeBlock:
		if hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0 {
			return u.mkWhiteout(pfd, base) // already in overlayfs form
		}
		return nil // device nodes are skipped: see the type's comment
	case tar.TypeFifo:
		if err := u.create(pfd, base, func() error { return unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0) }); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
		return u.meta(pfd, base, hdr, true)
	default:
		return fmt.Errorf("%w: unsupported tar entry type %q", ErrCorrupt, hdr.Typeflag)
	}
}

// resolveHow opens a folder of the layer the way the sandbox would see it.
var resolveHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
}

// openDir opens folder dir (relative to the root) of the layer.
func (u *unpacker) openDir(dir string) (int, error) {
	h := resolveHow
	for {
		fd, err := unix.Openat2(u.rootFd, dir, &h)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// parent returns an fd of folder dir, creating missing folders (mode
// 0755, owned by root) as tar does. The fd stays open until another
// folder is asked for.
func (u *unpacker) parent(dir string) (int, error) {
	if dir == "." {
		return u.rootFd, nil
	}
	if dir == u.cachedDir {
		return u.cachedFd, nil
	}
	if u.cachedFd >= 0 {
		unix.Close(u.cachedFd)
		u.cachedFd, u.cachedDir = -1, ""
	}
	fd, err := u.mkdirAll(dir)
	if err != nil {
		return -1, err
	}
	u.cachedFd, u.cachedDir = fd, dir
	return fd, nil
}

func (u *unpacker) mkdirAll(dir string) (int, error) {
	fd, err := u.openDir(dir)
	if err == nil {
		return fd, nil
	}
	if err != unix.ENOENT {
		return -1, fmt.Errorf("open folder %s: %w", dir, err)
	}
	parts := strings.Split(dir, "/")
	cur := u.rootFd
	for i, p := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		next, err := u.openDir(prefix)
		if err == unix.ENOENT {
			if err := unix.Mkdirat(cur, p, 0o755); err == unix.EEXIST {
				return -1, fmt.Errorf("%w: %s is a symlink whose target is not a folder of the layer", ErrCorrupt, prefix)
			} else if err != nil {
				return -1, fmt.Errorf("make folder %s: %w", prefix, err)
			}
			next, err = u.openDir(prefix)
		}
		if cur != u.rootFd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, fmt.Errorf("open folder %s: %w", prefix, err)
		}
		cur = next
	}
	return cur, nil
}

// replace removes what is at base in folder pfd, if anything: a later
// entry of a tar replaces an earlier one.
func (u *unpacker) replace(pfd int, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(pfd, base, 0); err != nil {
			return fmt.Errorf("replace: %w", err)
		}
		return nil
	}
	// A real folder (not followed: checked above); RemoveAll removes with
	// *at calls from its parent and never follows a symlink inside.
	if err := os.RemoveAll("/proc/self/fd/" + strconv.Itoa(pfd) + "/" + base); err != nil {
		return fmt.Errorf("replace folder: %w", err)
	}
	return nil
}

func (u *unpacker) whiteout(pfd int, base string) error {
	switch {
	case base == whiteoutOpaque:
		if err := unix.Fsetxattr(pfd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark folder opaque: %w", err)
		}
		return nil
	case strings.HasPrefix(base, whiteoutMeta):
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return fmt.Errorf("%w: whiteout of %q", ErrCorrupt, target)
	}
	return u.mkWhiteout(pfd, target)
}

// mkWhiteout makes the overlayfs whiteout of base: a 0/0 character device
// owned by root.
func (u *unpacker) mkWhiteout(pfd int, base string) error {
	if err := u.create(pfd, base, func() error { return unix.Mknodat(pfd, base, unix.S_IFCHR, 0) }); err != nil {
		return fmt.Errorf("make whiteout: %w", err)
	}
	return nil
}

// create runs mk, which makes base in folder pfd without following a
// symlink there; when base exists, it removes it and runs mk again (a
// later entry of a tar replaces an earlier one).
func (u *unpacker) create(pfd int, base string, mk func() error) error {
	err := mk()
	if err != unix.EEXIST {
		return err
	}
	if err := u.replace(pfd, base); err != nil {
		return err
	}
	return mk()
}

func (u *unpacker) dir(pfd int, name, base string, hdr *tar.Header) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := u.replace(pfd, base); err != nil {
			return err
		}
		err = unix.ENOENT
	}
	if err == unix.ENOENT {
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return fmt.Errorf("make folder: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open folder: %w", err)
	}
	defer unix.Close(fd)
	if err := u.fdMeta(fd, hdr); err != nil {
		return err
	}
	u.dirTimes = append(u.dirTimes, entryTimes{name: name, ts: times(hdr)})
	return nil
}

func (u *unpacker) rootMeta(hdr *tar.Header) error {
	if err := u.fdMeta(u.rootFd, hdr); err != nil {
		return err
	}
	u.dirTimes = append(u.dirTimes, entryTimes{name: ".", ts: times(hdr)})
	return nil
}

func (u *unpacker) file(pfd int, base string, hdr *tar.Header, r io.Reader) error {
	if err := u.checkSpace(hdr.Size); err != nil {
		return err
	}
	fd := -1
	err := u.create(pfd, base, func() (err error) {
		fd, err = unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	n, err := io.CopyBuffer(f, r, u.buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	u.size += n
	if err := u.fdMeta(fd, hdr); err != nil {
		return err
	}
	ts := times(hdr)
	if err := unix.UtimesNanoAt(pfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func (u *unpacker) hardlink(pfd int, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("%w: hard link: %w", ErrCorrupt, err)
	}
	if target == "." {
		return fmt.Errorf("%w: hard link to the layer's root", ErrCorrupt)
	}
	tdir, tbase := path.Split(target)
	tdir = strings.TrimSuffix(tdir, "/")
	tfd := u.rootFd
	if tdir != "" {
		if tfd, err = u.openDir(tdir); err != nil {
			return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
		}
		defer unix.Close(tfd)
	}
	// No AT_SYMLINK_FOLLOW: a link to a symlink links the symlink itself.
	if err := u.create(pfd, base, func() error { return unix.Linkat(tfd, tbase, pfd, base, 0) }); err != nil {
		return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
	}
	return nil
}

// meta sets owner, mode (unless it is a symlink) and times of base in pfd,
// without following a symlink.
func (u *unpacker) meta(pfd int, base string, hdr *tar.Header, chmod bool) error {
	if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return chownError(err)
	}
	if chmod {
		// Fchmodat follows symlinks, but base was just made as a FIFO.
		if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o7777), 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	ts := times(hdr)
	if err := unix.UtimesNanoAt(pfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

// fdMeta sets owner, mode and xattrs of an open file or folder. The mode
// comes after the owner: chown clears set-uid bits.
func (u *unpacker) fdMeta(fd int, hdr *tar.Header) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return chownError(err)
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok || !keptXattr(name) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

// keptXattr reports whether an xattr of a layer is written to disk.
func keptXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "security.capability"
}

func chownError(err error) error {
	if err == unix.EPERM {
		return fmt.Errorf("chown: %w (keeping an image's file owners needs root)", err)
	}
	return fmt.Errorf("chown: %w", err)
}

func times(hdr *tar.Header) [2]unix.Timespec {
	at := hdr.AccessTime
	if at.IsZero() {
		at = hdr.ModTime
	}
	return [2]unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
}

// setDirTimes sets the folders' times, children first.
func (u *unpacker) setDirTimes() error {
	for i := len(u.dirTimes) - 1; i >= 0; i-- {
		d := u.dirTimes[i]
		if d.name == "." {
			if err := unix.UtimesNanoAt(u.rootFd, ".", d.ts[:], 0); err != nil {
				return fmt.Errorf("set times of the layer's root: %w", err)
			}
			continue
		}
		dir, base := path.Split(d.name)
		dir = strings.TrimSuffix(dir, "/")
		pfd := u.rootFd
		if dir != "" {
			fd, err := u.openDir(dir)
			if err != nil {
				continue // replaced by a later entry
			}
			pfd = fd
		}
		err := unix.UtimesNanoAt(pfd, base, d.ts[:], unix.AT_SYMLINK_NOFOLLOW)
		if pfd != u.rootFd {
			unix.Close(pfd)
		}
		if err != nil && err != unix.ENOENT {
			return fmt.Errorf("set times of %s: %w", d.name, err)
		}
	}
	return nil
}
