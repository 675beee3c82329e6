package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Identity mapping of sandboxes started by root: uid/gid 0..65535 inside
// map to uidBase.. on the host. Every sandbox of a machine shares the range
// so that volumes can be shared between sandboxes; sandboxes cannot reach
// each other anyway (separate pid, mount and ipc namespaces).
const (
	uidBase = 100000
	uidSize = 65536
)

// shiftedMode reports whether sandboxes get the shifted uid range: this
// process is root and its own user namespace maps the whole range (not so
// as root of a rootless container, which then uses the single-uid mode).
func shiftedMode() bool {
	if os.Geteuid() != 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		var in, out, n int
		if _, err := fmt.Sscan(line, &in, &out, &n); err == nil && in <= uidBase && in+n >= uidBase+uidSize {
			return true
		}
	}
	return false
}

// ensureOwned creates dir (and parents) and, when shifted, gives it to the
// sandbox root.
func ensureOwned(dir string, shifted bool) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil {
		if !shifted || (st.Uid == uidBase && st.Gid == uidBase) {
			return nil
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if shifted {
		return os.Lchown(dir, uidBase, uidBase)
	}
	return nil
}

// checkUserns explains why user namespaces are unavailable, or returns nil.
func checkUserns() error {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return fmt.Errorf("%w: user namespaces are disabled (user.max_user_namespaces = 0); enable them with `sysctl -w user.max_user_namespaces=15000`", sandbox.ErrIsolationUnavailable)
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return fmt.Errorf("%w: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); enable them with `sysctl -w kernel.unprivileged_userns_clone=1` or run as root", sandbox.ErrIsolationUnavailable)
		}
		if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
			return fmt.Errorf("%w: AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); run as root, or allow this binary with an AppArmor profile granting `userns`", sandbox.ErrIsolationUnavailable)
		}
	}
	return nil
}

// launch starts the init of the sandbox folder dir (locked by the caller).
// ready waits until it serves, or kills it and reports why it could not;
// the caller reaps cmd. The init outlives this process.
//
// The init is forked first and the host prepares the sandbox's folders,
// socket and cgroup placement while the new process starts its runtime;
// it then sends the configuration and the descriptors over the control
// socket (fd 3), and the init answers "ok" or an error on it.
func launch(ctx context.Context, dir string, m *meta, cg *cgroupSet, stateDir string) (cmd *exec.Cmd, ready func() error, err error) {
	if err := checkUserns(); err != nil {
		return nil, nil, err
	}
	o := m.Options
	shifted := shiftedMode()

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ctl := os.NewFile(uintptr(fds[0]), "control")
	child := os.NewFile(uintptr(fds[1]), "control-child")
	defer child.Close()
	closeCtl := true
	defer func() {
		if closeCtl {
			ctl.Close()
		}
	}()

	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if o.NetworkBlockAll {
		flags |= unix.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
	if shifted {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uidBase, Size: uidSize}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uidBase, Size: uidSize}}
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	} else {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	v2cgroup := false
	if cg != nil && cg.Version == 2 {
		if f, err := os.Open(cg.Paths["unified"]); err == nil {
			defer f.Close()
			attr.UseCgroupFD = true
			attr.CgroupFD = int(f.Fd())
			v2cgroup = true
		}
	}
	cmd = &exec.Cmd{
		// /proc/self/exe reaches this program even when a folder on its
		// path is closed to the sandbox's host uid.
		Path: "/proc/self/exe",
		Args: []string{"agentbox-init", m.ID},
		Env: []string{
			initEnv + "=1",
			"GOGC=50", "GOMAXPROCS=2", "GODEBUG=madvdontneed=1",
			// Race-enabled builds (tests) would sleep 1s at every init exit.
			"GORACE=atexit_sleep_ms=0",
		},
		ExtraFiles:  []*os.File{child},
		SysProcAttr: attr,
		Dir:         "/",
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
			return nil, nil, fmt.Errorf("%w: creating the sandbox namespaces failed: %v; this host does not allow user namespaces for this user (run as root, or enable unprivileged user namespaces)", sandbox.ErrIsolationUnavailable, err)
		}
		if errors.Is(err, syscall.EACCES) && shifted {
			self, _ := os.Executable()
			return nil, nil, fmt.Errorf("start sandbox init: %w: the sandbox re-executes this program (%s) as host uid %d, which may not execute it; make it executable by others (chmod o+rx)", err, self, uidBase)
		}
		return nil, nil, fmt.Errorf("start sandbox init: %w", err)
	}
	child.Close()
	abort := func(err error) (*exec.Cmd, func() error, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}

	// While the init starts: its cgroups, folders, socket.
	cgDone := make(chan error, 1)
	if cg != nil && !v2cgroup {
		go func() { cgDone <- cg.add(cmd.Process.Pid) }()
	} else {
		cgDone <- nil
	}
	cfg, files, err := prepare(dir, m, stateDir, shifted)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if cgErr := <-cgDone; err == nil {
		err = cgErr
	}
	if err != nil {
		return abort(err)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return abort(err)
	}
	rights := make([]int, len(files))
	for i, f := range files {
		rights[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(int(ctl.Fd()), cfgJSON, unix.UnixRights(rights...), nil, 0); err != nil {
		return abort(fmt.Errorf("start sandbox init: send configuration: %w", err))
	}

	// ready waits for "ok" or an error message; EOF without a word means
	// the init died.
	closeCtl = false
	ready = func() error {
		msg := make(chan string, 1)
		go func() {
			b := make([]byte, 4096)
			n, _ := ctl.Read(b)
			ctl.Close()
			msg <- string(b[:max(n, 0)])
		}()
		kill := func() { _ = cmd.Process.Kill() } // the caller reaps it
		select {
		case s := <-msg:
			if s == "ok" {
				return nil
			}
			kill()
			if s == "" {
				s = "the init exited before it was ready"
			}
			if strings.Contains(s, "operation not permitted") || strings.Contains(s, "permission denied") {
				return fmt.Errorf("%w: sandbox init: %s", sandbox.ErrIsolationUnavailable, s)
			}
			return fmt.Errorf("sandbox init: %s", s)
		case <-ctx.Done():
			kill()
			<-msg
			return ctx.Err()
		case <-time.After(30 * time.Second):
			kill()
			<-msg
			return errors.New("sandbox init: not ready after 30s")
		}
	}
	return cmd, ready, nil
}

// prepare makes the folders of the sandbox in dir and the toolbox socket,
// and returns the init's configuration with the descriptors to send it:
// the listening socket first, then one detached mount per bind when
// shifted (otherwise the init opens the bind sources by path).
func prepare(dir string, m *meta, stateDir string, shifted bool) (*initConfig, []*os.File, error) {
	o := m.Options
	home := "/home/" + o.User
	hostname := m.ID[:min(len(m.ID), 63)]
	cfg := &initConfig{
		ID:          m.ID,
		Hostname:    hostname,
		Home:        home,
		WorkDir:     o.WorkingDirectory,
		NetworkNone: o.NetworkBlockAll,
		AutoStop:    int64(o.AutoStopInterval),
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + home, "USER=" + o.User, "LOGNAME=" + o.User,
			"SHELL=/bin/bash", "LANG=C.UTF-8", "TERM=xterm-256color",
			"HOSTNAME=" + hostname, "TMPDIR=/tmp",
		},
	}

	// Folders the sandbox writes, each bound in from the state dir.
	type src struct {
		host string
		bindSpec
	}
	srcs := []src{
		{filepath.Join(dir, "home"), bindSpec{Target: home}},
		{filepath.Join(dir, "tmp"), bindSpec{Target: "/tmp"}},
		// The toolbox server's own files (command logs), fresh each boot.
		{filepath.Join(dir, toolboxDir), bindSpec{Target: initTmpDir}},
	}
	if err := removeAll(filepath.Join(dir, toolboxDir)); err != nil {
		return nil, nil, stateDirError(stateDir, err)
	}
	wd := o.WorkingDirectory
	inside := func(p, base string) bool { return p == base || strings.HasPrefix(p, base+"/") }
	covered := inside(wd, home) || inside(wd, "/tmp")
	for _, v := range o.Volumes {
		srcs = append(srcs, src{filepath.Join(stateDir, volumesDir, v.Name), bindSpec{Target: v.MountPath, ReadOnly: v.ReadOnly}})
		covered = covered || inside(wd, v.MountPath)
	}
	if !covered {
		srcs = append(srcs, src{filepath.Join(dir, "workdir"), bindSpec{Target: wd}})
	}

	var files []*os.File
	fail := func(err error) (*initConfig, []*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, err
	}
	// The toolbox socket: listened on here, served by the init.
	sock := filepath.Join(dir, socketFile)
	_ = os.Remove(sock)
	sockPath, release, err := shortPath(dir, socketFile)
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("unix", sockPath)
	release()
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", sock, err))
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	lnFile, err := ul.File()
	ul.Close()
	if err != nil {
		return fail(err)
	}
	files = append(files, lnFile)
	_ = os.Chmod(sock, 0o600)

	for _, s := range srcs {
		if err := ensureOwned(s.host, shifted); err != nil {
			return fail(stateDirError(stateDir, err))
		}
		if shifted {
			// The sandbox's host uid may not traverse the state dir (it often
			// lives under /root), so hand it detached clones of the folders.
			fd, err := unix.OpenTree(unix.AT_FDCWD, s.host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return fail(fmt.Errorf("clone mount of %s: %w", s.host, err))
			}
			f := os.NewFile(uintptr(fd), s.host)
			files = append(files, f)
			if s.ReadOnly {
				attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
				if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
					return fail(fmt.Errorf("make %s read-only: %w", s.host, err))
				}
			}
			s.FD = len(files) - 1
		} else {
			// The init opens the folder itself, in its own mount namespace.
			s.FD = -1
			s.Path = s.host
		}
		cfg.Binds = append(cfg.Binds, s.bindSpec)
	}
	return cfg, files, nil
}

// shortPath returns a path naming dir/name that fits in a unix socket
// address: dir/name itself when short enough, else a path through a
// /proc/self/fd link to dir, valid until release is called.
func shortPath(dir, name string) (p string, release func(), err error) {
	full := filepath.Join(dir, name)
	if len(full) < 100 {
		return full, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, name), func() { unix.Close(fd) }, nil
}
