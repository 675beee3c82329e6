package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentbox-dev/agentbox/local/internal/fuse"
	"github.com/agentbox-dev/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// fuseForbiddenTargets are the folders on, in and above which no FUSE
// mount of a sandbox goes (see fuse.NewSupervisor): the kernel's views
// and the init's own folder (its command logs).
var fuseForbiddenTargets = []string{"/proc", "/sys", "/dev", initTmpDir}

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
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(fuse.DevMajor, fuse.DevMinor))); err != nil {
			return spec, nil, fmt.Errorf("AllowFUSE: make the sandbox's /dev/fuse: %w", err)
		}
		if err := os.Chmod(p, 0o666); err != nil { // whatever the umask
			return spec, nil, fmt.Errorf("AllowFUSE: %w", err)
		}
	} else {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return spec, nil, sandbox.NewOptionError(nil, sandbox.OptionAllowFUSE, ": this host has no /dev/fuse (load the fuse module)").WithCause(err)
		}
		if st.Mode&0o006 != 0o006 {
			return spec, nil, sandbox.NewOptionError(nil, sandbox.OptionAllowFUSE, ": /dev/fuse is open to root only and this process is not root: run as root, or make /dev/fuse mode 0666 as most distributions do")
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
