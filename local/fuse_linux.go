package local

import (
	"bytes"
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

// FUSE inside a sandbox (Confinement.AllowFUSE). Commands hold no
// CAP_SYS_ADMIN, so the kernel would refuse their mount(2) whatever the
// type; the system call filter hands mount and umount2 to the init
// instead (SECCOMP_RET_USER_NOTIF), and the init's supervisor, which
// holds the capabilities of the sandbox's user namespace, does on the
// caller's behalf what it allows: FUSE mounts and unmounts, nothing else.
// The supervisor never lets the call continue in the caller (whose
// arguments could change under it) except where the filter would not
// have refused it anyway (nested namespaces allowed): it mounts with its
// own copies of the arguments, read once from the caller's memory.

// fuseDevMajor and fuseDevMinor are /dev/fuse's device number.
const fuseDevMajor, fuseDevMinor = 10, 229

// fuseSuperMagic is a FUSE file system's f_type in statfs.
const fuseSuperMagic = 0x65735546

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

// fuseForbiddenTargets are the folders on, in and above which no FUSE
// mount goes: the kernel's views and the init's own folder (its command
// logs), which a FUSE server could otherwise answer for, or hang. A mount
// on an ancestor (/run for /run/agentbox, / for all) would hide them as
// surely as one on them.
var fuseForbiddenTargets = []string{"/proc", "/sys", "/dev", initTmpDir}

// fuseForbidden reports whether a FUSE mount on the folder p (as the
// sandbox sees it, clean and absolute) would cover a forbidden folder: p
// is one, is inside one, or is an ancestor of one.
func fuseForbidden(p string) bool {
	for _, f := range fuseForbiddenTargets {
		if within(p, f) || p == "/" || within(f, p) {
			return true
		}
	}
	return false
}

// fuseSupervisor answers the mount and umount2 calls the filter hands the
// init.
type fuseSupervisor struct {
	fd int // the filter's notification descriptor
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

// newFUSESupervisor returns the supervisor of the notification
// descriptor fd.
func newFUSESupervisor(fd int, passThrough bool) (*fuseSupervisor, error) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("FUSE supervisor: %w", err)
	}
	return &fuseSupervisor{fd: fd, passThrough: passThrough, mntNS: ns}, nil
}

// serve answers calls until the descriptor fails (the init ends).
func (s *fuseSupervisor) serve() {
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
func (s *fuseSupervisor) answer(req *seccompNotif) seccompNotifResp {
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

// fuseCaller is the process whose call the supervisor handles.
type fuseCaller struct {
	pid   int
	pidfd int
	mem   *os.File
	uid   int // its fsuid
	gid   int // its fsgid
	s     *fuseSupervisor
	id    uint64
}

// caller opens the caller of req: a pidfd that pins it, and its memory.
func (s *fuseSupervisor) caller(req *seccompNotif) (*fuseCaller, error) {
	c := &fuseCaller{pid: int(req.pid), pidfd: -1, s: s, id: req.id}
	// req.pid is the calling thread's id; a pidfd names a process (a
	// thread other than the leader, which a Go program's call may come
	// from, is refused with ENOENT): open the thread's group.
	tgid, err := threadGroup(c.pid)
	if err != nil {
		return nil, err
	}
	if c.pidfd, err = unix.PidfdOpen(tgid, 0); err != nil {
		return nil, err
	}
	if c.mem, err = os.Open("/proc/" + strconv.Itoa(c.pid) + "/mem"); err != nil {
		c.close()
		return nil, unix.EPERM
	}
	if ns, err := os.Readlink("/proc/" + strconv.Itoa(c.pid) + "/ns/mnt"); err != nil || ns != s.mntNS {
		// A nested mount namespace: not ours to mount into.
		c.close()
		return nil, errPassThrough
	}
	if c.uid, c.gid, err = fsIDs(c.pid); err != nil {
		c.close()
		return nil, unix.EPERM
	}
	// The pid may have been reused between the notification and the
	// open: the call must still be pending.
	if err := c.valid(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// valid checks that the call is still pending (the caller, whose pid was
// read, is the one waiting).
func (c *fuseCaller) valid() error {
	id := c.id
	return ioctlPtr(c.s.fd, seccompIoctlNotifIDValid, unsafe.Pointer(&id))
}

func (c *fuseCaller) close() {
	if c.mem != nil {
		c.mem.Close()
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
	}
}

// threadGroup returns the process id (Tgid) of the thread tid.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Tgid in status")
}

// fsIDs reads the file system uid and gid of pid.
func fsIDs(pid int) (uid, gid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	uid, gid = -1, -1
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 4 {
			continue
		}
		switch k {
		case "Uid":
			uid, err = strconv.Atoi(f[3])
		case "Gid":
			gid, err = strconv.Atoi(f[3])
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, errors.New("no Uid or Gid in status")
	}
	return uid, gid, nil
}

// str reads the NUL-terminated string at addr of the caller's memory, of
// at most max bytes.
func (c *fuseCaller) str(addr uint64, max int) (string, error) {
	if addr == 0 {
		return "", nil
	}
	buf := make([]byte, max+1)
	n, err := c.mem.ReadAt(buf, int64(addr))
	if n == 0 && err != nil {
		return "", unix.EFAULT
	}
	i := bytes.IndexByte(buf[:n], 0)
	if i < 0 {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:i]), nil
}

// isFUSEType reports whether fstype names a FUSE file system: "fuse" or
// "fuse.NAME" (fuseblk needs a block device, which a sandbox has none of).
func isFUSEType(fstype string) bool {
	return fstype == "fuse" || (strings.HasPrefix(fstype, "fuse.") && len(fstype) > len("fuse.") && !strings.ContainsAny(fstype, ",\x00"))
}

// mount handles mount(source, target, fstype, flags, data).
func (s *fuseSupervisor) mount(c *fuseCaller, args [6]uint64) error {
	fstype, err := c.str(args[2], 64)
	if err != nil {
		return err
	}
	flags := uintptr(args[3])
	if !isFUSEType(fstype) || flags&^fuseMountFlags != 0 {
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

// fuseOptions checks the FUSE mount options data and returns them with
// fd= naming the supervisor's duplicate of the caller's /dev/fuse
// descriptor, which it also returns. A caller other than root must mount
// as itself.
func (c *fuseCaller) fuseOptions(data string) (string, int, error) {
	var out []string
	dev := -1
	fail := func(err error) (string, int, error) {
		if dev >= 0 {
			unix.Close(dev)
		}
		return "", -1, err
	}
	for _, o := range strings.Split(data, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "fd":
			n, err := strconv.Atoi(v)
			if err != nil || dev >= 0 {
				return fail(unix.EINVAL)
			}
			if dev, err = unix.PidfdGetfd(c.pidfd, n, 0); err != nil {
				dev = -1
				return fail(unix.EINVAL)
			}
			var st unix.Stat_t
			if err := unix.Fstat(dev, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR ||
				unix.Major(st.Rdev) != fuseDevMajor || unix.Minor(st.Rdev) != fuseDevMinor {
				return fail(unix.EINVAL)
			}
			o = "fd=" + strconv.Itoa(dev)
		case "user_id", "group_id":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fail(unix.EINVAL)
			}
			if c.uid != 0 && ((k == "user_id" && n != c.uid) || (k == "group_id" && n != c.gid)) {
				return fail(unix.EPERM)
			}
		}
		out = append(out, o)
	}
	if dev < 0 {
		return fail(unix.EINVAL)
	}
	return strings.Join(out, ","), dev, nil
}

// openTarget opens (O_PATH) the caller's path p, relative to its working
// directory, as the caller sees it, and refuses the forbidden folders.
// dir asks for a folder; mountPoint refuses the folders a FUSE mount
// would cover a forbidden one from (fuseForbidden), else only those in a
// forbidden one. The path is resolved without magic links (/proc/PID/fd/N,
// cwd, root …): the supervisor would resolve them as itself (/proc/self
// is the init), reaching whatever the init holds.
func (c *fuseCaller) openTarget(p string, dir, mountPoint bool) (int, error) {
	if p == "" {
		return -1, unix.ENOENT
	}
	proc := "/proc/" + strconv.Itoa(c.pid)
	// The caller's root is the init's (both in the sandbox's mount
	// namespace, neither chrooted: a chrooted caller is refused).
	if r, err := os.Readlink(proc + "/root"); err != nil || r != "/" {
		return -1, unix.EPERM
	}
	// The caller's own root and working directory are the one magic link
	// followed, on purpose: they are where its path starts.
	base, resolve := proc+"/cwd", uint64(unix.RESOLVE_NO_MAGICLINKS)
	if filepath.IsAbs(p) {
		base, resolve = proc+"/root", resolve|unix.RESOLVE_IN_ROOT
	}
	start, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.EPERM
	}
	defer unix.Close(start)
	flags := uint64(unix.O_PATH | unix.O_CLOEXEC)
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat2(start, p, &unix.OpenHow{Flags: flags, Resolve: resolve})
	if err != nil {
		return -1, err
	}
	resolved, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(resolved) {
		unix.Close(fd)
		return -1, unix.EPERM
	}
	refused := fuseForbidden(resolved)
	if !mountPoint {
		refused = false
		for _, f := range fuseForbiddenTargets {
			refused = refused || within(resolved, f)
		}
	}
	if refused {
		unix.Close(fd)
		return -1, unix.EPERM
	}
	return fd, nil
}

// umount handles umount2(target, flags) of a FUSE mount.
func (s *fuseSupervisor) umount(c *fuseCaller, args [6]uint64) error {
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
		if !isFUSEType(m.FSType) {
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

// fuseDevFile is the sandbox's /dev/fuse node in its state folder, made
// at every start when the host is root.
const fuseDevFile = "fuse"

// fuseDevice returns the node to bind at the sandbox's /dev/fuse, as
// bindSource does for folders. The host's /dev/fuse is often open to root
// only, which the sandbox's root (another host uid) is not: as root, the
// host makes a node of the sandbox's own, open to every user of the
// sandbox, in its state folder dir (which no other user of the host
// reaches: the sandboxes' folder is 0700; the clone mount the init moves
// in place needs the node to stay); otherwise it binds its own /dev/fuse
// when that is open to every user.
func fuseDevice(dir string, own *ownership) (spec bindSpec, f *os.File, err error) {
	spec = bindSpec{Target: "/dev/fuse", FD: -1}
	p := "/dev/fuse"
	if os.Geteuid() == 0 {
		p = filepath.Join(dir, fuseDevFile)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return spec, nil, err
		}
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(fuseDevMajor, fuseDevMinor))); err != nil {
			return spec, nil, fmt.Errorf("AllowFUSE: make the sandbox's /dev/fuse: %w", err)
		}
		if err := os.Chmod(p, 0o666); err != nil { // whatever the umask
			return spec, nil, fmt.Errorf("AllowFUSE: %w", err)
		}
	} else {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return spec, nil, fmt.Errorf("AllowFUSE: this host has no /dev/fuse (load the fuse module): %w", err)
		}
		if st.Mode&0o006 != 0o006 {
			return spec, nil, fmt.Errorf("AllowFUSE: /dev/fuse is open to root only and this process is not root: run as root, or make /dev/fuse mode 0666 as most distributions do")
		}
	}
	if !own.shifted() {
		spec.Path = p
		return spec, nil, nil
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return spec, nil, fmt.Errorf("AllowFUSE: clone mount of %s: %w", p, err)
	}
	return spec, os.NewFile(uintptr(fd), p), nil
}

// openFUSEDev opens, before the host's files are hidden, the source of the
// sandbox's /dev/fuse when it has one.
func (r *rootfs) openFUSEDev() error {
	b := r.cfg.FUSEDev
	if b == nil {
		return nil
	}
	if b.FD >= 0 {
		r.fuseDev = r.fds[b.FD]
		return nil
	}
	fd, err := unix.Open(b.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", b.Path, err)
	}
	r.fuseDev = fd
	return nil
}

// bindFUSEDev binds the sandbox's /dev/fuse in the folder dev, when it has
// one.
func (r *rootfs) bindFUSEDev(dev string) error {
	b := r.cfg.FUSEDev
	if b == nil {
		return nil
	}
	defer unix.Close(r.fuseDev)
	t := filepath.Join(dev, "fuse")
	f, err := os.OpenFile(t, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	f.Close()
	if b.FD >= 0 {
		err = unix.MoveMount(r.fuseDev, "", unix.AT_FDCWD, t, unix.MOVE_MOUNT_F_EMPTY_PATH)
	} else {
		err = unix.Mount("/proc/self/fd/"+strconv.Itoa(r.fuseDev), t, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("bind /dev/fuse: %w", err)
	}
	return nil
}

// FUSEAvailable reports whether sandboxes made by this process can have
// Confinement.AllowFUSE: the host has /dev/fuse, and this process is root
// (it then makes each sandbox a node of its own) or /dev/fuse is open to
// every user.
func FUSEAvailable() bool {
	var st unix.Stat_t
	if unix.Stat("/dev/fuse", &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false
	}
	return os.Geteuid() == 0 || st.Mode&0o006 == 0o006
}
