package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// launch starts the init of the sandbox folder dir (locked by the caller)
// and returns once it serves. The init outlives this process.
func launch(ctx context.Context, dir string, m *meta, cg *cgroupSet, stateDir string) (*exec.Cmd, error) {
	if err := checkUserns(); err != nil {
		return nil, err
	}
	o := m.Options
	home := "/home/" + o.User
	shifted := shiftedMode()
	// /proc/self/exe reaches this program even when a folder on its path is
	// closed to the sandbox's host uid.
	exe := "/proc/self/exe"

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
		return nil, stateDirError(stateDir, err)
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
	runDir := filepath.Join(dir, "run")
	for _, p := range append([]string{runDir}, func() []string {
		var out []string
		for _, s := range srcs {
			out = append(out, s.host)
		}
		return out
	}()...) {
		if err := ensureOwned(p, shifted); err != nil {
			return nil, stateDirError(stateDir, err)
		}
	}
	_ = os.Remove(filepath.Join(runDir, exitFile))

	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	open := func(p string) (*os.File, error) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		files = append(files, f)
		return f, nil
	}

	// The toolbox socket: listened on here, served by the init.
	sock := filepath.Join(dir, socketFile)
	_ = os.Remove(sock)
	sockPath, release, err := shortPath(dir, socketFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", sockPath)
	release()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	lnFile, err := ul.File()
	ul.Close()
	if err != nil {
		return nil, err
	}
	files = append(files, lnFile)
	_ = os.Chmod(sock, 0o600)

	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	files = append(files, readyR, readyW)
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	files = append(files, goR, goW)
	runF, err := open(runDir)
	if err != nil {
		return nil, err
	}
	extra := []*os.File{lnFile, readyW, goR, runF}
	cfg := initConfig{
		ID:          m.ID,
		Hostname:    m.ID[:min(len(m.ID), 63)],
		Home:        home,
		WorkDir:     wd,
		NetworkNone: o.NetworkBlockAll,
		AutoStop:    int64(o.AutoStopInterval),
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + home, "USER=" + o.User, "LOGNAME=" + o.User,
			"SHELL=/bin/bash", "LANG=C.UTF-8", "TERM=xterm-256color",
			"HOSTNAME=" + m.ID[:min(len(m.ID), 63)], "TMPDIR=/tmp",
		},
	}
	for _, s := range srcs {
		if shifted {
			// The sandbox's host uid may not traverse the state dir (it often
			// lives under /root), so hand it detached clones of the folders.
			fd, err := unix.OpenTree(unix.AT_FDCWD, s.host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return nil, fmt.Errorf("clone mount of %s: %w", s.host, err)
			}
			f := os.NewFile(uintptr(fd), s.host)
			files = append(files, f)
			if s.ReadOnly {
				attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
				if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
					return nil, fmt.Errorf("make %s read-only: %w", s.host, err)
				}
			}
			extra = append(extra, f)
			s.Detached = true
		} else {
			// The init opens the folder itself, in its own mount namespace.
			extra = append(extra, runF) // placeholder keeps fd numbering
			s.Path = s.host
		}
		cfg.Binds = append(cfg.Binds, s.bindSpec)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}

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
	var cgf *os.File
	if cg != nil && cg.Version == 2 {
		if f, err := os.Open(cg.Paths["unified"]); err == nil {
			cgf = f
			files = append(files, f)
			attr.UseCgroupFD = true
			attr.CgroupFD = int(f.Fd())
		}
	}
	cmd := &exec.Cmd{
		Path: exe,
		Args: []string{"agentbox-init", m.ID},
		Env: []string{
			initEnv + "=" + string(cfgJSON),
			"GOGC=50", "GOMAXPROCS=2", "GODEBUG=madvdontneed=1",
			// Race-enabled builds (tests) would sleep 1s at every init exit.
			"GORACE=atexit_sleep_ms=0",
		},
		ExtraFiles:  extra,
		SysProcAttr: attr,
		Dir:         "/",
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
			return nil, fmt.Errorf("%w: creating the sandbox namespaces failed: %v; this host does not allow user namespaces for this user (run as root, or enable unprivileged user namespaces)", sandbox.ErrIsolationUnavailable, err)
		}
		if errors.Is(err, syscall.EACCES) {
			self, _ := os.Executable()
			return nil, fmt.Errorf("start sandbox init: %w: the sandbox re-executes this program (%s) as host uid %d, which may not execute it; make it executable by others (chmod o+rx)", err, self, uidBase)
		}
		return nil, fmt.Errorf("start sandbox init: %w", err)
	}
	fail := func(err error) (*exec.Cmd, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	if cg != nil && cgf == nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	readyW.Close()
	if _, err := goW.Write([]byte{1}); err != nil {
		return fail(fmt.Errorf("start sandbox init: %w", err))
	}
	goW.Close()

	// Wait for "ok" or an error message; EOF without a word means it died.
	msg := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(readyR, 4096))
		msg <- string(b)
	}()
	select {
	case s := <-msg:
		if s != "ok" {
			if s == "" {
				s = "the init exited before it was ready"
			}
			if strings.Contains(s, "operation not permitted") || strings.Contains(s, "permission denied") {
				return fail(fmt.Errorf("%w: sandbox init: %s", sandbox.ErrIsolationUnavailable, s))
			}
			return fail(fmt.Errorf("sandbox init: %s", s))
		}
	case <-ctx.Done():
		r, _ := fail(ctx.Err())
		<-msg
		return r, ctx.Err()
	case <-time.After(30 * time.Second):
		r, err := fail(errors.New("sandbox init: not ready after 30s"))
		<-msg
		return r, err
	}
	return cmd, nil
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
