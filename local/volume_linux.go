package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Who owns, on the host, the folders a sandbox binds in.
//
// A sandbox's own folders (home, /tmp, the working directory, the
// toolbox's files) belong to its own host ids: uid k inside is host uid
// first+k, so `ls -ln` on the host shows which sandbox made a file.
//
// Volumes are shared between sandboxes with different ranges, so their
// files keep canonical owners on disk instead: the uid a file has inside
// (0 for what the sandbox's root makes), whichever sandbox made it. Each
// sandbox started by root sees a volume through an ID-mapped mount
// (mount_setattr MOUNT_ATTR_IDMAP) made with its own user namespace, which
// shows canonical uid k as its own host uid first+k, that is as uid k
// inside: a file made by one sandbox is its own to every other sandbox
// sharing the volume, mode bits and all (a 0600 file included), and what
// a sandbox makes there is stored as canonical ids, never as its range.
// On the host, `ls -ln` of a volume shows the uids of inside (0 for the
// sandboxes' root). A shared group would not do as well: files are made
// with the umask's mode, so a group's members could not write each
// other's files, and a uid mapped outside the sandbox's range would need
// a mapping of its own in every sandbox.
//
// Since a sandbox's root makes canonical uid 0 files, a set-user-ID file
// it makes in a volume is set-user-ID root on the host: the volumes
// folder is kept mode 0700, so that only root reaches it.
//
// Volumes of the shared-range era (owned by 100000+k) are converted to
// canonical ids when a sandbox first binds them.

// ownership says who owns the folders a sandbox binds in.
type ownership struct {
	ids *idRange // the sandbox's host ids
	// userns is the sandbox's user namespace, the ID mapping of its
	// volumes' and image layers' mounts; nil without a range of its own
	// or such mounts.
	userns *os.File
}

// newOwnership returns the ownership of the folders of a sandbox whose
// ids map to ids and whose init is pid; mapped says whether it has
// ID-mapped mounts (volumes, image layers).
func newOwnership(ids *idRange, pid int, mapped bool) (*ownership, error) {
	o := &ownership{ids: ids}
	if o.shifted() && mapped {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
		if err != nil {
			return nil, fmt.Errorf("open the sandbox's user namespace: %w", err)
		}
		o.userns = f
	}
	return o, nil
}

// shifted reports whether the sandbox has a host id range of its own.
func (o *ownership) shifted() bool { return o.ids.Count > 1 }

// owner returns the host uid (and gid) that owns the sandbox's own
// folders: its root's, or -1 (this process's) without a range of its own.
func (o *ownership) owner() int {
	if o.shifted() {
		return o.ids.First
	}
	return -1
}

func (o *ownership) close() {
	if o.userns != nil {
		o.userns.Close()
	}
}

// prepareFolder makes the host folder of b with its owner: the sandbox's
// root for its own folders, the canonical root (this process, root) for a
// volume, converted first from the shared-range era.
func (o *ownership) prepareFolder(b hostBind) error {
	if !b.volume {
		uid, gid := o.owner(), o.owner()
		if b.owner != nil && o.shifted() {
			uid, gid = o.ids.First+b.owner.UID, o.ids.First+b.owner.GID
		}
		return ensureOwned(b.host, b.perm, uid, gid)
	}
	if err := ensurePrivateDir(filepath.Dir(b.host)); err != nil {
		return err
	}
	if o.shifted() {
		if err := convertLegacyVolume(b.host); err != nil {
			return err
		}
	}
	return ensureOwned(b.host, 0, -1, -1)
}

// setMountAttr makes the detached mount fd of b read-only if b says so
// and, for a volume, ID-mapped with the sandbox's user namespace.
func (o *ownership) setMountAttr(fd int, b hostBind) error {
	var attr unix.MountAttr
	if b.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if b.volume {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(o.userns.Fd())
	}
	if attr.Attr_set == 0 {
		return nil
	}
	err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
	switch {
	case err == nil:
		return nil
	case !b.volume:
		return fmt.Errorf("make %s read-only: %w", b.host, err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("volume %s: ID-mapped mount: %w; sharing volumes between sandboxes needs Linux 5.12 or later", b.host, err)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("volume %s: ID-mapped mount: %w; its file system does not support ID-mapped mounts (ext4, xfs, btrfs and, from Linux 6.3, tmpfs do): move the state dir to one that does", b.host, err)
	}
	return fmt.Errorf("volume %s: ID-mapped mount: %w", b.host, err)
}

// ensurePrivateDir makes dir, or sets it back to, a folder of mode 0700.
func ensurePrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if st.Mode&0o7777 != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// convertLegacyVolume gives the files of the volume folder dir, if it was
// made when every sandbox shared host ids 100000-165535 (dir is owned by
// 100000), their canonical owners: host id 100000+k becomes k. The folder
// itself changes last, so an interrupted conversion resumes at the next
// bind; a lock on the folder keeps two starts from converting it at once.
// Each file is reached from the folder without following any symbolic
// link (a sandbox of an older version using the volume meanwhile cannot
// redirect the changes outside it). Set-user-ID and set-group-ID bits,
// which chown clears, are set again; file capabilities and ACL entries
// naming ids are not converted.
func convertLegacyVolume(dir string) error {
	if !legacyVolume(dir) {
		return nil
	}
	root, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := unix.Flock(int(root.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	if !legacyVolume(dir) {
		return nil // converted while we waited
	}
	err = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == dir {
			return nil
		}
		return unshiftOwner(int(root.Fd()), p[len(dir)+1:])
	})
	if err == nil {
		err = unshiftOwner(int(root.Fd()), ".")
	}
	if err != nil {
		return fmt.Errorf("volume %s: convert its files from the shared host ids %d-%d: %w", dir, legacyIDs.First, legacyIDs.End()-1, err)
	}
	return nil
}

// legacyVolume reports whether the volume folder dir is owned by the
// shared range's root.
func legacyVolume(dir string) bool {
	var st unix.Stat_t
	return unix.Lstat(dir, &st) == nil && st.Uid == legacyIDBase
}

// unshiftOwner changes owner ids in the shared range to canonical ones on
// the file rel beneath the folder rootFD. A file gone, or reached only
// through a symbolic link, is left alone.
func unshiftOwner(rootFD int, rel string) error {
	fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	unshift := func(id uint32) int {
		if legacyIDs.Overlaps(idRange{First: int(id), Count: 1}) {
			return int(id) - legacyIDBase
		}
		return int(id)
	}
	uid, gid := unshift(st.Uid), unshift(st.Gid)
	if uid == int(st.Uid) && gid == int(st.Gid) {
		return nil
	}
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("chown %s: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		// The descriptor's link names the very file, not a path.
		return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777)
	}
	return nil
}
