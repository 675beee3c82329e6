package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The host side of a start: launch forks this program, re-executed as the
// sandbox's init in new namespaces; while the new process starts its
// runtime, the host prepares the sandbox's folders, socket and cgroup
// placement (prepare_linux.go), then sends the configuration over the
// control socket (control_linux.go) and waits for the init's answer.

// sandboxNamespaces are the namespaces every sandbox has of its own; the
// network namespace depends on the Config (networkCloneFlags).
const sandboxNamespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// readyTimeout bounds the wait for a new init to serve.
const readyTimeout = 30 * time.Second

// boot starts the init of the locked folder dir and records it in m. On
// failure the caller cleans up with killInit(m).
func (s *Sandbox) boot(ctx context.Context, dir string, m *meta) error {
	ids, err := hostIDsFor(ctx, s.opts.StateDir, dir, m, s.opts.HostIDBase)
	if err != nil {
		return err
	}
	m.HostIDs = ids
	cg, err := newCgroupSet(cgroupKey(s.opts.StateDir, m.ID))
	if err != nil {
		cg = nil // accounting only; the pid namespace still holds the sandbox
	}
	m.Cgroups = cg
	cmd, ready, err := launch(ctx, dir, m, cg, s.opts.StateDir)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reap the init when it ends while we live
		close(done)
	}()
	s.mu.Lock()
	s.waits = append(s.waits, done)
	s.mu.Unlock()
	pid := cmd.Process.Pid
	st, _ := procStartTime(pid)
	m.Init = &initRecord{PID: pid, StartTime: st}
	m.Status = sandbox.StatusRunning
	m.StoppedAt = time.Time{}
	// Record the init while it builds its root, then wait for it.
	werr := writeMeta(dir, m)
	if err := ready(); err != nil {
		return err
	}
	if werr != nil {
		return stateDirError(s.opts.StateDir, werr)
	}
	s.afterStart(true)
	return nil
}

// launch starts the init of the sandbox folder dir (locked by the caller).
// ready waits until it serves, or kills it and reports why it could not;
// the caller reaps cmd. The init outlives this process.
func launch(ctx context.Context, dir string, m *meta, cg *cgroupSet, stateDir string) (cmd *exec.Cmd, ready func() error, err error) {
	if err := checkUserns(); err != nil {
		return nil, nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ctl := os.NewFile(uintptr(fds[0]), "control")
	child := os.NewFile(uintptr(fds[1]), "control-child")
	defer child.Close()

	cmd = initCommand(m, child)
	// On v2 the init is cloned straight into its cgroup; on v1 the host
	// moves it there while it starts.
	cgFile := cg.openV2()
	if cgFile != nil {
		defer cgFile.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cgFile.Fd())
	}
	if err := startInit(cmd, m.HostIDs); err != nil {
		ctl.Close()
		return nil, nil, startError(err, m.HostIDs)
	}
	child.Close()
	var moveInto *cgroupSet
	if cgFile == nil {
		moveInto = cg
	}
	if err := configure(cmd.Process.Pid, ctl, dir, m, moveInto, stateDir); err != nil {
		ctl.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	return cmd, func() error { return awaitReady(ctx, cmd, ctl) }, nil
}

// initCommand returns the command of the init of the sandbox m, in its new
// namespaces, with child as its control socket.
func initCommand(m *meta, child *os.File) *exec.Cmd {
	attr := &syscall.SysProcAttr{
		Cloneflags: sandboxNamespaces | networkCloneFlags(&m.Config),
		Setsid:     true,
	}
	setIDMappings(attr, m.HostIDs)
	return &exec.Cmd{
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
}

// startError explains why the init, whose ids map to ids, could not be
// started.
func startError(err error, ids *idRange) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%w: creating the sandbox namespaces failed: %v; this host does not allow user namespaces for this user (run as root, or enable unprivileged user namespaces)", sandbox.ErrIsolationUnavailable, err)
	}
	if errors.Is(err, syscall.EACCES) && ids.Count > 1 {
		self, _ := os.Executable()
		return fmt.Errorf("start sandbox init: %w: the sandbox re-executes this program (%s) as host uid %d, which may not execute it; make it executable by others (chmod o+rx)", err, self, ids.First)
	}
	return fmt.Errorf("start sandbox init: %w", err)
}

// configure readies the sandbox of the started init pid: it moves the init
// into the cgroups moveInto (unless nil) while it prepares the folders,
// socket and binds of dir, then sends the init its configuration over ctl.
func configure(pid int, ctl *os.File, dir string, m *meta, moveInto *cgroupSet, stateDir string) error {
	cgDone := make(chan error, 1)
	if moveInto != nil {
		go func() { cgDone <- moveInto.add(pid) }()
	} else {
		cgDone <- nil
	}
	cfg, files, err := prepare(dir, m, stateDir, pid)
	defer closeFiles(files)
	if cgErr := <-cgDone; err == nil {
		err = cgErr
	}
	if err != nil {
		return err
	}
	return sendConfig(ctl, cfg, files)
}

// awaitReady waits for the init's "ok" or error message on ctl, then
// closes ctl; EOF without a word means the init died. On failure it kills
// the init (the caller reaps it).
func awaitReady(ctx context.Context, cmd *exec.Cmd, ctl *os.File) error {
	msg := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		n, _ := ctl.Read(b)
		ctl.Close()
		msg <- string(b[:max(n, 0)])
	}()
	kill := func() { _ = cmd.Process.Kill() }
	select {
	case s := <-msg:
		if s == "ok" {
			return nil
		}
		kill()
		return initError(s)
	case <-ctx.Done():
		kill()
		<-msg
		return ctx.Err()
	case <-time.After(readyTimeout):
		kill()
		<-msg
		return fmt.Errorf("sandbox init: not ready after %v", readyTimeout)
	}
}

// closeFiles closes every file of files.
func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
