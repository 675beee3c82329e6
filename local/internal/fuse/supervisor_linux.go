package fuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/agentbox-dev/agentbox/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// The supervisor never lets the call continue in the caller (whose
// arguments could change under it) except where the filter would not
// have refused it anyway (nested namespaces allowed): it mounts with its
// own copies of the arguments, read once from the caller's memory.

// DevMajor and DevMinor are /dev/fuse's device number.
const DevMajor, DevMinor = 10, 229

// SuperMagic is a FUSE file system's f_type in statfs.
const SuperMagic = 0x65735546

// seccompIoctlNotifIDValid is SECCOMP_IOCTL_NOTIF_ID_VALID,
// _IOW('!', 2, __u64), which golang.org/x/sys/unix lacks.
const seccompIoctlNotifIDValid = 0x40082102

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// fuseMountFlags are the mount(2) flags a FUSE mount may carry; nosuid and
// nodev are added whatever the caller asked.
const fuseMountFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
	unix.MS_SYNCHRONOUS | unix.MS_DIRSYNC | unix.MS_NOATIME | unix.MS_NODIRATIME |
	unix.MS_SILENT | unix.MS_RELATIME | unix.MS_STRICTATIME | unix.MS_LAZYTIME

// fuseUmountFlags are the umount2 flags an unmount may carry.
const fuseUmountFlags = unix.MNT_FORCE | unix.MNT_DETACH | unix.MNT_EXPIRE | unix.UMOUNT_NOFOLLOW

// Covers reports whether a FUSE mount on the folder p (as the sandbox
// sees it, clean and absolute) would cover one of the folders: p is one,
// is inside one, or is an ancestor of one (a mount there would hide it as
// surely as one on it).
func Covers(p string, folders []string) bool {
	for _, f := range folders {
		if within(p, f) || p == "/" || within(f, p) {
			return true
		}
	}
	return false
}

// Supervisor answers the mount and umount2 calls the filter hands the
// init.
type Supervisor struct {
	fd int // the filter's notification descriptor
	// forbidden are the folders on, in and above which no FUSE mount
	// goes.
	forbidden []string
	// passThrough lets a call the supervisor does not handle continue in
	// the caller, where the filter would have allowed it (nested
	// namespaces); otherwise such calls fail with EPERM.
	passThrough bool
	// mntNS is the init's mount namespace (the commands'), as
	// /proc/self/ns/mnt reads.
	mntNS string
	// mu orders the supervisor's changes of the mount table: only the
	// supervisor changes the sandbox's mounts for its commands (they hold
	// no CAP_SYS_ADMIN), so under mu the mount an unmount checked is the
	// one it removes (no other call unmounts it, or stacks one on it,
	// meanwhile).
	mu sync.Mutex
}

// NewSupervisor returns the supervisor of the system call filter's
// notification descriptor fd, run in the mount namespace of the callers
// it serves. With passThrough, a call it does not handle continues in the
// caller (the filter would have allowed it: nested namespaces); otherwise
// such calls fail with EPERM. No FUSE mount goes on, in or above the
// folders forbidden (the kernel's views, the init's own folder), which a
// FUSE server could otherwise answer for, or hang.
func NewSupervisor(fd int, passThrough bool, forbidden []string) (*Supervisor, error) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("FUSE supervisor: %w", err)
	}
	return &Supervisor{fd: fd, passThrough: passThrough, mntNS: ns, forbidden: forbidden}, nil
}

// Serve answers calls until the descriptor fails (the init ends).
func (s *Supervisor) Serve() {
	for {
		var req seccompNotif
		if err := ioctlPtr(s.fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&req)); err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOENT) {
				continue // ENOENT: the caller went away before we got it
			}
			return
		}
		// Each call on its own goroutine: reading a caller's memory can
		// block (a string in a page its own FUSE server never serves),
		// which must not hold up the other calls.
		go func() {
			resp := s.answer(&req)
			resp.id = req.id
			// ENOENT: the caller is gone (killed); nothing to tell.
			_ = ioctlPtr(s.fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
		}()
	}
}

// ioctlPtr is ioctl(fd, req, p).
func ioctlPtr(fd int, req uint, p unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p)); e != 0 {
		return e
	}
	return nil
}

// errPassThrough says a call is not the supervisor's to handle.
var errPassThrough = errors.New("not a FUSE call")

// answer handles one call and returns the response to send.
func (s *Supervisor) answer(req *seccompNotif) seccompNotifResp {
	c, err := s.caller(req)
	if err == nil {
		defer c.close()
		switch nr := uintptr(req.nr); nr {
		case unix.SYS_MOUNT:
			err = s.mount(c, req.args)
		case unix.SYS_UMOUNT2:
			err = s.umount(c, req.args)
		default:
			err = errPassThrough
		}
	}
	if errors.Is(err, errPassThrough) {
		if s.passThrough {
			return seccompNotifResp{flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		}
		err = unix.EPERM
	}
	if err == nil {
		return seccompNotifResp{}
	}
	var en unix.Errno
	if !errors.As(err, &en) {
		en = unix.EPERM
	}
	return seccompNotifResp{error: -int32(en)}
}

// IsType reports whether fstype names a FUSE file system: "fuse" or
// "fuse.NAME" (fuseblk needs a block device, which a sandbox has none of).
func IsType(fstype string) bool {
	return fstype == "fuse" || (strings.HasPrefix(fstype, "fuse.") && len(fstype) > len("fuse.") && !strings.ContainsAny(fstype, ",\x00"))
}

// mount handles mount(source, target, fstype, flags, data).
func (s *Supervisor) mount(c *fuseCaller, args [6]uint64) error {
	fstype, err := c.str(args[2], 64)
	if err != nil {
		return err
	}
	flags := uintptr(args[3])
	if !IsType(fstype) || flags&^fuseMountFlags != 0 {
		// Not a new FUSE mount (a bind, remount, move, propagation
		// change, another type).
		return errPassThrough
	}
	source, err := c.str(args[0], 4096)
	if err != nil {
		return err
	}
	target, err := c.str(args[1], unix.PathMax)
	if err != nil {
		return err
	}
	data, err := c.str(args[4], 4095)
	if err != nil {
		return err
	}
	dir, err := c.openTarget(target, true, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if c.uid != 0 {
		// As fusermount3 checks: a user mounts on a folder of its own.
		var st unix.Stat_t
		if err := unix.Fstat(dir, &st); err != nil {
			return err
		}
		if int(st.Uid) != c.uid {
			return unix.EPERM
		}
	}
	opts, dev, err := c.fuseOptions(data)
	if err != nil {
		return err
	}
	defer unix.Close(dev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.valid(); err != nil {
		return err
	}
	return unix.Mount(source, "/proc/self/fd/"+strconv.Itoa(dir), fstype, flags|unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// umount handles umount2(target, flags) of a FUSE mount.
func (s *Supervisor) umount(c *fuseCaller, args [6]uint64) error {
	flags := int(args[1])
	if flags&^fuseUmountFlags != 0 {
		return unix.EINVAL
	}
	target, err := c.str(args[0], unix.PathMax)
	if err != nil {
		return err
	}
	// The mount point is reached from its parent folder, which the
	// supervisor holds while it checks and unmounts: a descriptor of the
	// mount itself would keep it busy.
	if !filepath.IsAbs(target) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(c.pid) + "/cwd")
		if err != nil {
			return unix.EPERM
		}
		target = filepath.Join(cwd, target)
	}
	target = filepath.Clean(target)
	if target == "/" {
		return errPassThrough
	}
	parent, err := c.openTarget(filepath.Dir(target), true, false)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	name := filepath.Base(target)
	if name == "." || name == ".." {
		return unix.EINVAL
	}
	follow := flags&unix.UMOUNT_NOFOLLOW == 0
	id, err := topMountID(parent, name, follow)
	if err != nil {
		return err
	}
	// The mount table, not statfs, says whether this is a FUSE mount:
	// statfs asks the FUSE server, which may be dead (ENOTCONN) or never
	// answer, and such a mount must still come off.
	isFUSE, owner, err := fuseMountByID(id)
	if err != nil {
		return err
	}
	if !isFUSE {
		return errPassThrough
	}
	if c.uid != 0 && owner != c.uid {
		return unix.EPERM
	}
	// The name is looked up once more, not followed, under mu: a symlink
	// put in its place since is refused, and so is any mount but the one
	// checked; no other change of the mount table comes between this
	// check and the unmount.
	s.mu.Lock()
	defer s.mu.Unlock()
	if now, err := topMountID(parent, name, false); err != nil || now != id {
		return unix.EINVAL
	}
	if err := c.valid(); err != nil {
		return err
	}
	// A folder that is no mount's root fails with EINVAL.
	return unix.Unmount("/proc/self/fd/"+strconv.Itoa(parent)+"/"+name, flags|unix.UMOUNT_NOFOLLOW)
}

// topMountID returns the id of the mount the name in the folder parent
// reaches (the topmost mount on it), following a last symlink when follow.
func topMountID(parent int, name string, follow bool) (uint64, error) {
	oflags := unix.O_PATH | unix.O_CLOEXEC
	if !follow {
		oflags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(parent, name, oflags, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &sx); err != nil {
		return 0, err
	}
	if sx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, unix.EINVAL
	}
	return sx.Mnt_id, nil
}

// fuseMountByID reports whether the mount of id mntID is a FUSE mount
// (file system type fuse or fuse.*), and its user_id, from
// /proc/self/mountinfo, without asking the FUSE server anything.
func fuseMountByID(mntID uint64) (isFUSE bool, owner int, err error) {
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return false, -1, err
	}
	for _, m := range ms {
		if m.ID != mntID {
			continue
		}
		if !IsType(m.FSType) {
			return false, -1, nil
		}
		if v, ok := mountinfo.Option(m.SuperOptions, "user_id"); ok {
			n, err := strconv.Atoi(v)
			return true, n, err
		}
		return true, -1, nil
	}
	return false, -1, unix.EINVAL
}

// within reports whether the clean absolute path p is base or inside it.
func within(p, base string) bool {
	return p == base || strings.HasPrefix(p, base+"/")
}
