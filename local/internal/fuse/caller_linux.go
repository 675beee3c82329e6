package fuse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fuseCaller is the process whose call the supervisor handles.
type fuseCaller struct {
	pid   int
	pidfd int
	mem   *os.File
	uid   int // its fsuid
	gid   int // its fsgid
	s     *Supervisor
	id    uint64
}

// caller opens the caller of req: a pidfd that pins it, and its memory.
func (s *Supervisor) caller(req *seccompNotif) (*fuseCaller, error) {
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
				unix.Major(st.Rdev) != DevMajor || unix.Minor(st.Rdev) != DevMinor {
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
// would cover a forbidden one from (Covers), else only those in a
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
	refused := Covers(resolved, c.s.forbidden)
	if !mountPoint {
		refused = false
		for _, f := range c.s.forbidden {
			refused = refused || within(resolved, f)
		}
	}
	if refused {
		unix.Close(fd)
		return -1, unix.EPERM
	}
	return fd, nil
}
