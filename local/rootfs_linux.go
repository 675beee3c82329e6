package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/mountinfo"

	"golang.org/x/sys/unix"
)

// The sandbox's root file system, built by the init (in its new mount
// namespace, as uid 0 of its new user namespace, before anything of the
// user runs) in steps that initSteps lists in order:
//
//   - a small tmpfs becomes the new root;
//   - the host's system folders (/usr, /etc, /bin, /lib …) are bound in,
//     read-only, or recreated as the same symlinks, with a copy of
//     /etc/passwd that names uid 0 as the sandbox's user;
//   - /proc is fresh for the sandbox's pid namespace, /dev minimal;
//   - the state folders (home, /tmp, the working directory, the toolbox's
//     files) and the volumes are bound in from the state dir;
//   - resolv.conf is brought along when it links into /run;
//   - pivot_root, then the root itself becomes read-only.

// newRoot is where the new root is built: a tmpfs mounted over /tmp, which
// every Linux host has and everyone may traverse. The init's mount
// namespace is private, so the host's /tmp is untouched.
const newRoot = "/tmp"

// rootfs is the state of the root file system steps.
type rootfs struct {
	cfg      *initConfig
	fds      []int    // the descriptors received with the configuration
	sources  []int    // per cfg.Binds, the descriptor of its source
	readOnly []string // mount points under newRoot to make read-only
	fuseDev  int      // the source of /dev/fuse (Confinement.AllowFUSE), else 0
}

// at returns the path of p (a path inside the sandbox) under newRoot.
func (r *rootfs) at(p string) string { return filepath.Join(newRoot, p) }

// mkdirIn makes the folder p (a path inside the sandbox) and its parents
// in the new root, resolved inside it: a link of an image's root (or of
// what a sandbox left in its writable root) leads nowhere outside, even
// before pivot_root, while the host's folders are still in view. It
// returns an O_PATH descriptor of the folder and whether it made it.
func (r *rootfs) mkdirIn(p string) (int, bool, error) {
	root, err := unix.Open(newRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, err
	}
	defer unix.Close(root)
	return mkdirAllInRoot(root, p, 0o755, -1, -1)
}

// mountedAt returns the path of the folder fd, a mount point: what
// mountinfo lists (remountReadOnly).
func mountedAt(fd int) (string, error) {
	return os.Readlink(fdPath(fd))
}

// makePrivate stops mount events propagating to and from the host.
func (r *rootfs) makePrivate() error {
	return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
}

// openSources opens the bind sources given by path now, while the host's
// /tmp (where a state dir may live) is still visible; the others arrived
// as descriptors (detached mounts).
func (r *rootfs) openSources() error {
	r.sources = make([]int, len(r.cfg.Binds))
	for i, b := range r.cfg.Binds {
		if b.FD >= 0 {
			r.sources[i] = r.fds[b.FD]
			continue
		}
		fd, err := unix.Open(b.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", b.Path, err)
		}
		r.sources[i] = fd
	}
	return r.openFUSEDev()
}

// mountRoot mounts the tmpfs of the new root, or moves the writable root
// made of an image (mountRoot, host side) there.
func (r *rootfs) mountRoot() error {
	if r.image() {
		err := unix.MoveMount(r.fds[r.cfg.RootFD], "", unix.AT_FDCWD, newRoot, unix.MOVE_MOUNT_F_EMPTY_PATH)
		// Moved in place, the root needs no descriptor: the init holds
		// none it does not use.
		unix.Close(r.fds[r.cfg.RootFD])
		if err != nil {
			return err
		}
		// The image's /run is the sandbox's, fresh at each start.
		run, _, err := r.mkdirIn("run")
		if err != nil {
			return err
		}
		defer unix.Close(run)
		return unix.Mount("agentbox-run", fdPath(run), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m")
	}
	return unix.Mount("agentbox-root", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m")
}

// image reports whether the root is made of an image: writable, with the
// image's system folders.
func (r *rootfs) image() bool { return r.cfg.RootFD >= 0 }

// bindSystem binds the host's system folders, to be made read-only, and
// recreates those that are symlinks (e.g. /bin → usr/bin). A root made of
// an image has its own.
func (r *rootfs) bindSystem() error {
	if r.image() {
		return nil
	}
	for _, d := range []string{"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt"} {
		if err := r.bindSystemFolder("/" + d); err != nil {
			return err
		}
	}
	return nil
}

func (r *rootfs) bindSystemFolder(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return nil // not on this host
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(d)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, r.at(d)); err != nil {
			return fmt.Errorf("link %s: %w", d, err)
		}
		return nil
	}
	if !fi.IsDir() {
		return nil
	}
	if err := os.Mkdir(r.at(d), 0o755); err != nil {
		return err
	}
	if err := unix.Mount(d, r.at(d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", d, err)
	}
	r.readOnly = append(r.readOnly, r.at(d))
	return nil
}

// nameUser makes uid 0 of a sandbox with the host's system folders go by
// the sandbox's user name (Config.User), as $USER and $HOME say: its
// /etc/passwd is the host's with a first entry for uid 0 of that name and
// home, bound over the host's file (whoami, id -un and ls -l then agree
// with $USER). The copy lives in the sandbox's /run, read-only with the
// root.
func (r *rootfs) nameUser() error {
	user := r.cfg.User
	if r.image() || user == "" || user == "root" {
		return nil
	}
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return nil // a host without one: nothing to name
	}
	text := passwdNaming(host, user, r.cfg.home())
	dir := r.at("run/agentbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, "passwd")
	if err := os.WriteFile(p, text, 0o644); err != nil {
		return err
	}
	if err := unix.Mount(p, r.at("etc/passwd"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s over /etc/passwd: %w", p, err)
	}
	r.readOnly = append(r.readOnly, r.at("etc/passwd"))
	return nil
}

// mountProc mounts a /proc of the sandbox's pid namespace.
func (r *rootfs) mountProc() error {
	fd, _, err := r.mkdirIn("proc")
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Mount("proc", fdPath(fd), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// makeDev makes a minimal /dev: a few host nodes bound in, symlinks, a
// private devpts and /dev/shm.
func (r *rootfs) makeDev() error {
	// Made inside the root (an image's /dev may be a link), then named by
	// the path it resolved to, which holds no link.
	fd, _, err := r.mkdirIn("dev")
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	dev, err := mountedAt(fd)
	if err != nil {
		return err
	}
	if err := unix.Mount("agentbox-dev", fdPath(fd), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bindFile("/dev/"+n, filepath.Join(dev, n), 0o666); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx", "core": "/proc/kcore",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	if err := r.bindFUSEDev(dev); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dev, "pts"), 0o755); err != nil {
		return err
	}
	// A missing devpts only costs terminals; do not fail the sandbox.
	_ = unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("agentbox-shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

// bindFile binds the host file src at dst, which it creates with perm.
func bindFile(src, dst string, perm os.FileMode) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// bindState binds the writable, persistent folders of the state dir and
// the volumes, parents first.
func (r *rootfs) bindState() error {
	order := make([]int, len(r.cfg.Binds))
	for i := range order {
		order[i] = i
	}
	depth := func(i int) int { return strings.Count(r.cfg.Binds[i].Target, "/") }
	sort.SliceStable(order, func(i, j int) bool { return depth(order[i]) < depth(order[j]) })
	for _, i := range order {
		if err := r.bindStateFolder(r.cfg.Binds[i], r.sources[i]); err != nil {
			return err
		}
	}
	return nil
}

// bindStateFolder mounts the source fd of b at its target and closes fd.
func (r *rootfs) bindStateFolder(b bindSpec, fd int) error {
	defer unix.Close(fd)
	at, _, err := r.mkdirIn(b.Target)
	if err != nil {
		return fmt.Errorf("create mount point %s: %w", b.Target, err)
	}
	defer unix.Close(at)
	if b.FD >= 0 {
		err = unix.MoveMount(fd, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	} else {
		err = unix.Mount(fdPath(fd), fdPath(at), "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("bind %s: %w", b.Target, err)
	}
	if b.ReadOnly {
		t, err := mountedAt(at)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		r.readOnly = append(r.readOnly, t)
	}
	return nil
}

// makeFolders makes the home, the working directory, /var/tmp (a link to
// /tmp) and /run, where the state folders do not provide them.
func (r *rootfs) makeFolders() error {
	for _, d := range []string{r.cfg.home(), r.cfg.WorkingDirectory} {
		fd, made, err := r.mkdirIn(d)
		if err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		// A working directory an image lacks is its user's, as Docker
		// makes it.
		if u := r.cfg.RunAs; made && u != nil && d == r.cfg.WorkingDirectory {
			err = unix.Fchownat(fd, "", u.UID, u.GID, unix.AT_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	v, _, err := r.mkdirIn("var")
	if err != nil {
		return err
	}
	err = unix.Symlinkat("../tmp", v, "tmp")
	unix.Close(v)
	if err != nil && !(r.image() && errors.Is(err, fs.ErrExist)) {
		return err
	}
	run, _, err := r.mkdirIn("run")
	if err == nil {
		unix.Close(run)
	}
	return err
}

// mkdirNew makes the folder dir, or finds it made (in an image).
func mkdirNew(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// bindResolvConf gives the sandbox the resolver the host chose for it
// (ownResolvConf), or brings along, read-only, the file /etc/resolv.conf
// names when it links into /run (systemd-resolved), so that name
// resolution works. Without it the sandbox only lacks name resolution.
func (r *rootfs) bindResolvConf() error {
	if r.image() {
		return r.imageResolvConf()
	}
	if ns := r.cfg.Net.Nameserver; ns != "" {
		return r.ownResolvConf("# agentbox: DNS through the host (see Info)\nnameserver " + ns + "\n")
	}
	t, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil || !strings.HasPrefix(t, "/run/") || strings.HasPrefix(t, initTmpDir) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.at(t)), 0o755); err != nil {
		return nil
	}
	if bindFile(t, r.at(t), 0o644) == nil {
		r.readOnly = append(r.readOnly, r.at(t))
	}
	return nil
}

// ownResolvConf makes the sandbox's /etc/resolv.conf say content: a file
// of the root tmpfs, where the host's link leads when it is a link into
// /run, else bound over the host's file.
func (r *rootfs) ownResolvConf(content string) error {
	dst := "/run/resolv.conf"
	if link, err := os.Readlink("/etc/resolv.conf"); err == nil {
		if !filepath.IsAbs(link) {
			link = filepath.Join("/etc", link)
		}
		if t := filepath.Clean(link); strings.HasPrefix(t, "/run/") && !within(t, initTmpDir) {
			dst = t
		}
	}
	if err := os.MkdirAll(filepath.Dir(r.at(dst)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(r.at(dst), []byte(content), 0o644); err != nil {
		return err
	}
	if dst != "/run/resolv.conf" {
		return nil // the link leads to it
	}
	if _, err := os.Lstat("/etc/resolv.conf"); err != nil {
		return nil // the host has none to cover
	}
	if err := unix.Mount(r.at(dst), r.at("/etc/resolv.conf"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind resolv.conf: %w", err)
	}
	return nil
}

// imageResolvConf gives a root made of an image the resolver the host
// chose for the sandbox, or the host's own resolv.conf: a file of its
// /run bound over its /etc/resolv.conf (made a plain file if the image
// has none, or a link).
func (r *rootfs) imageResolvConf() error {
	content := []byte("# agentbox: DNS through the host (see Info)\nnameserver " + r.cfg.Net.Nameserver + "\n")
	if r.cfg.Net.Nameserver == "" {
		b, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			return nil // the host has none: no name resolution
		}
		content = b
	}
	// Both files are reached inside the root (mkdirIn), the image's
	// /etc/resolv.conf made a plain file of the root, never followed.
	run, _, err := r.mkdirIn("run")
	if err != nil {
		return err
	}
	defer unix.Close(run)
	src, err := unix.Openat(run, "resolv.conf", unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("write /run/resolv.conf: %w", err)
	}
	f := os.NewFile(uintptr(src), "resolv.conf")
	defer f.Close()
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("write /run/resolv.conf: %w", err)
	}
	etc, _, err := r.mkdirIn("etc")
	if err != nil {
		return err
	}
	defer unix.Close(etc)
	var st unix.Stat_t
	if err := unix.Fstatat(etc, "resolv.conf", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Unlinkat(etc, "resolv.conf", 0)
	}
	dst, err := unix.Openat(etc, "resolv.conf", unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create /etc/resolv.conf: %w", err)
	}
	defer unix.Close(dst)
	if err := unix.Fstat(dst, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("the image's /etc/resolv.conf is not a regular file: make it one, or remove it")
	}
	if err := unix.Mount(fdPath(src), fdPath(dst), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /etc/resolv.conf: %w", err)
	}
	return nil
}

// remountReadOnly makes every mount at or under the read-only targets
// read-only, keeping the flags a user namespace may not clear.
func (r *rootfs) remountReadOnly() error {
	if len(r.readOnly) == 0 {
		return nil
	}
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		mp := m.MountPoint
		if !slices.ContainsFunc(r.readOnly, func(t string) bool { return within(mp, t) }) {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mp, &st); err != nil {
			continue // e.g. an unreachable autofs point
		}
		if err := unix.Mount("", mp, "", readOnlyRemountFlags(st.Flags), ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", strings.TrimPrefix(mp, newRoot), err)
		}
	}
	return nil
}

// readOnlyRemountFlags returns the flags of a read-only bind remount that
// keeps the locked flags (statfs flags) of a mount.
func readOnlyRemountFlags(statfs int64) uintptr {
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, p := range [][2]int64{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if statfs&p[0] != 0 {
			flags |= uintptr(p[1])
		}
	}
	return flags
}

// pivot makes newRoot the root and detaches the host's.
func (r *rootfs) pivot() error {
	const old = ".oldroot"
	if err := mkdirNew(r.at(old), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(newRoot, r.at(old)); err != nil {
		return err
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/"+old, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	return os.Remove("/" + old)
}

// rootReadOnly makes the (pivoted) root tmpfs read-only.
func (r *rootfs) rootReadOnly() error {
	if r.image() {
		return nil // the writable root
	}
	return unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}
