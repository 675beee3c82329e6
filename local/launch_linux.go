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

// boot starts the init of the locked folder dir (and has the state dir's
// egress proxy serve it, with a DomainAllowList) and records it in m, in
// the named steps of bootSteps: the init is a Pool's spare when one fits,
// else a new process. m is written to the state folder three times: once
// the init runs (so that a failed start is cleaned up), once it serves
// (its link and egress sockets), and after volumes are mounted again. On
// failure the caller cleans up with killInit(m).
func (s *Sandbox) boot(ctx context.Context, dir string, m *meta) error {
	b := &booting{s: s, ctx: ctx, dir: dir, m: m}
	if pool := s.opts.Pool; pool != nil && pool.fits(s, m) {
		b.spare = pool.take()
		// Replace the spare taken (or fill the pool for the next
		// sandbox) once this one is up, not while it starts.
		defer pool.refill()
	}
	defer b.release()
	for _, step := range b.steps() {
		if err := step.run(); err != nil {
			return err
		}
	}
	s.afterStart(true)
	return nil
}

// booting is a start in progress: what boot's steps hand each other.
type booting struct {
	s     *Sandbox
	ctx   context.Context
	dir   string
	m     *meta
	spare *spare // the Pool's spare that becomes the init, or nil
	// adopted: the spare is the sandbox's init (killInit ends it), so
	// release leaves it.
	adopted bool
	cg      *cgroupSet
	disk    *pendingDisk // mounted while the init is forked
	cmd     *exec.Cmd
	ready   func() (initAnswer, error)
	answer  initAnswer
}

// steps lists boot's steps in order. Their errors are returned as they
// are: each already says what failed.
func (b *booting) steps() []namedStep {
	return []namedStep{
		{"keep the secrets", b.keepSecrets},
		{"claim host ids and apply limits", b.claimResources},
		{"plan the network", b.planNetwork},
		{"start the init", b.startInit},
		{"record the init and wait for it", b.recordAndWait},
		{"serve egress", func() error { return b.s.serveEgress(b.ctx, b.m, b.egressFiles()) }},
		{"serve the user-mode network", func() error { return b.s.startUserNet(b.ctx, b.dir, b.m, b.tunFile()) }},
		{"redirect the secrets' traffic", func() error { return b.s.startRedirect(b.ctx, b.m) }},
		{"put the secrets' placeholders in the environment", b.secretsInside},
		{"mount volumes again", b.remountVolumes},
	}
}

// egressFiles returns the egress proxy's listening sockets among the
// files the init handed over: all but the user-mode network's TUN
// device, which comes last.
func (b *booting) egressFiles() []*os.File {
	if b.tunFile() != nil {
		return b.answer.files[:len(b.answer.files)-1]
	}
	return b.answer.files
}

// tunFile returns the user-mode network's TUN device the init handed
// over, or nil.
func (b *booting) tunFile() *os.File {
	if !initNetOf(b.m).Tun || len(b.answer.files) == 0 {
		return nil
	}
	return b.answer.files[len(b.answer.files)-1]
}

// release undoes what a start leaves behind whatever its end: the disk
// image's pending mount, the files the init handed over, and a spare
// that did not become the init.
func (b *booting) release() {
	closeFiles(b.answer.files)
	if b.disk != nil {
		b.disk.release()
	}
	if b.spare != nil && !b.adopted {
		_ = b.spare.destroy(context.WithoutCancel(b.ctx), b.s.opts.StateDir)
	}
}

// claimResources gets the sandbox's host id range (the spare's, or one
// of its own) and its limits (cgroups, disk image), which are independent:
// each waits for locks and the kernel. Then it starts mounting the disk
// image.
func (b *booting) claimResources() error {
	s, m := b.s, b.m
	var ids *idRange
	idsDone := make(chan error, 1)
	go func() {
		var err error
		if b.spare != nil {
			var r idRange
			r, err = claimHostIDs(b.ctx, s.opts.StateDir, b.spare.key, m.ID)
			ids = &r
		} else {
			ids, err = hostIDsFor(b.ctx, s.opts.StateDir, b.dir, m, s.opts.HostIDBase)
		}
		idsDone <- err
	}()
	cg, err := s.limit(b.dir, m)
	b.cg, m.Cgroups = cg, cg // killInit removes them if the range fails
	if ierr := <-idsDone; err == nil {
		err = ierr
	}
	if err != nil {
		return err
	}
	m.HostIDs = ids
	b.disk = mountInBackground(b.dir, m)
	return nil
}

// planNetwork checks the host offers the sandbox's network and records
// what the sandbox gets.
func (b *booting) planNetwork() error {
	m := b.m
	if err := checkNetworkAvailable(&m.Config); err != nil {
		return err
	}
	m.Network = b.s.newNetRecord(&m.Config)
	m.ProxyEnv = m.Config.hasDomains()
	b.s.mu.Lock()
	b.s.proxyEnv = m.ProxyEnv
	b.s.mu.Unlock()
	return nil
}

// startInit adopts the spare as the sandbox's init, or launches a new
// one, and records it in m (not written yet).
func (b *booting) startInit() error {
	s, m := b.s, b.m
	var err error
	if b.spare != nil {
		err = b.adoptSpare()
	} else {
		b.cmd, b.ready, err = launch(b.ctx, b.dir, m, b.cg, b.disk, s.opts.StateDir)
		if err == nil {
			s.reap(b.cmd)
		}
	}
	if err != nil {
		return err
	}
	pid := b.cmd.Process.Pid
	st, _ := procStartTime(pid)
	m.Init = &initRecord{PID: pid, StartTime: st}
	m.Status = sandbox.StatusRunning
	m.StoppedAt = time.Time{}
	return nil
}

// adoptSpare makes the spare the sandbox's init: its link is the
// sandbox's from now on (killInit removes it if the start fails).
func (b *booting) adoptSpare() error {
	s, m, sp := b.s, b.m, b.spare
	m.Network = sp.net
	if networkMode(&m.Config) != sandbox.NetworkPublic {
		// The spare has the default network's link and firewall: this
		// sandbox's policy replaces them, as a live change would, before
		// the init runs anything.
		if err := s.applyLink(b.ctx, m, m.Config); err != nil {
			return err
		}
	}
	b.cmd, b.adopted = sp.cmd, true
	s.mu.Lock()
	s.waits = append(s.waits, sp.done)
	s.mu.Unlock()
	var err error
	b.ready, err = sp.adopt(b.ctx, b.dir, m, b.cg, b.disk, s.opts.StateDir)
	if err != nil {
		<-sp.done
	}
	return err
}

// recordAndWait writes m while the init builds its root, then waits for
// the init (and for its link, recorded once made) and writes m again
// when the init made a link or handed over egress sockets.
func (b *booting) recordAndWait() error {
	m := b.m
	egressReady := b.s.prepareEgress(b.ctx, m)
	werr := writeMeta(b.dir, m)
	a, err := b.ready()
	b.answer = a
	perr := egressReady()
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	m.EgressFDs = a.egressFDs
	if werr == nil && (m.Network != nil && m.Network.Link != 0 || len(m.EgressFDs) > 0) {
		werr = writeMeta(b.dir, m)
	}
	if werr != nil {
		return stateDirError(b.s.opts.StateDir, werr)
	}
	return nil
}

// remountVolumes mounts the sandbox's volumes (Mount) again in the new
// init, and records their state.
func (b *booting) remountVolumes() error {
	if len(b.m.Mounts) == 0 {
		return nil
	}
	remountAll(b.ctx, b.dir, b.m)
	if err := writeMeta(b.dir, b.m); err != nil {
		return stateDirError(b.s.opts.StateDir, err)
	}
	return nil
}

// reap waits for cmd, a child process that outlives this one (an init),
// on a goroutine that waitInits waits for.
func (s *Sandbox) reap(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reap it when it ends while we live
		close(done)
	}()
	s.mu.Lock()
	s.waits = append(s.waits, done)
	s.mu.Unlock()
}

// launch starts the init of the sandbox folder dir (locked by the caller),
// whose disk image disk is being mounted.
// ready waits until it serves, and returns the descriptors it handed over
// with its answer (the egress proxy's listening sockets), or kills it and
// reports why it could not; the caller reaps cmd. The init outlives this
// process.
func launch(ctx context.Context, dir string, m *meta, cg *cgroupSet, disk *pendingDisk, stateDir string) (cmd *exec.Cmd, ready func() (initAnswer, error), err error) {
	if err := checkUserns(); err != nil {
		return nil, nil, err
	}
	// On v2 the init is cloned straight into its cgroup; on v1 the host
	// moves it there while it starts.
	cgFile := cg.OpenV2()
	if cgFile != nil {
		defer cgFile.Close()
	}
	cmd, ctl, nb, err := forkInit(ctx, m, func(cmd *exec.Cmd) {
		if cgFile != nil {
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = int(cgFile.Fd())
		}
	})
	if err != nil {
		return nil, nil, err
	}
	notePendingInit(dir, cmd.Process.Pid)
	var moveInto *cgroupSet
	if cgFile == nil {
		moveInto = cg
	}
	if err := configure(ctx, cmd.Process.Pid, ctl, dir, m, moveInto, disk, stateDir); err != nil {
		ctl.Close()
		_ = cmd.Process.Kill()
		_ = nb.finish()
		_ = cmd.Wait()
		return nil, nil, err
	}
	crashPoint("init configured")
	return cmd, func() (initAnswer, error) {
		a, err := awaitReady(ctx, cmd, ctl)
		if nerr := nb.finish(); nerr != nil && err == nil {
			closeFiles(a.files)
			_ = cmd.Process.Kill()
			return initAnswer{}, nerr
		}
		return a, err
	}, nil
}

// forkInit starts the init of the sandbox m, with adjust's changes to its
// command (when not nil), and returns it with the host's end of its
// control socket and its network's boot (see startInit).
func forkInit(ctx context.Context, m *meta, adjust func(*exec.Cmd)) (*exec.Cmd, *os.File, *netBoot, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ctl := os.NewFile(uintptr(fds[0]), "control")
	child := os.NewFile(uintptr(fds[1]), "control-child")
	defer child.Close() // the init has its copy
	cmd := initCommand(m, child)
	if adjust != nil {
		adjust(cmd)
	}
	nb, err := startInit(ctx, cmd, m)
	if err != nil {
		_ = nb.finish()
		ctl.Close()
		return nil, nil, nil, startError(err, m.HostIDs)
	}
	return cmd, ctl, nb, nil
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
			// One P: the init idles most of its life, and every P keeps
			// partly used spans of each size class of its own (about
			// 1 MiB of an idle init's 3 with two); its work is mostly
			// system calls, which release the P while they block.
			// containermaxprocs=0: the runtime would otherwise keep the
			// host's cgroup CPU limit files open for the init's life (the
			// init is born in the host's cgroup), descriptors of host
			// objects in the process that resolves the sandbox's paths.
			"GOGC=100", "GOMAXPROCS=1", "GODEBUG=madvdontneed=1,containermaxprocs=0",
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
// (The sandbox's link and firewall are made meanwhile: see netBoot.start.)
func configure(ctx context.Context, pid int, ctl *os.File, dir string, m *meta, moveInto *cgroupSet, disk *pendingDisk, stateDir string) error {
	cgDone := make(chan error, 1)
	if moveInto != nil {
		go func() { cgDone <- moveInto.Add(pid) }()
	} else {
		cgDone <- nil
	}
	cfg, files, err := prepare(dir, m, stateDir, pid, m.Cgroups, disk)
	defer closeFiles(files)
	if cgErr := <-cgDone; err == nil {
		err = cgErr
	}
	if err != nil {
		return err
	}
	cfg.Net = initNetOf(m)
	return sendConfig(ctl, cfg, files)
}

// awaitReady waits for the init's "ok" (with the descriptors it hands
// over) or error message on ctl, then closes ctl; EOF without a word means
// the init died. On failure it kills the init (the caller reaps it).
func awaitReady(ctx context.Context, cmd *exec.Cmd, ctl *os.File) (initAnswer, error) {
	msg := make(chan initAnswer, 1)
	go func() {
		a := receiveAnswer(ctl)
		ctl.Close()
		msg <- a
	}()
	kill := func() { _ = cmd.Process.Kill() }
	select {
	case a := <-msg:
		if a.text == "ok" {
			return a, nil
		}
		closeFiles(a.files)
		kill()
		return initAnswer{}, initError(a.text)
	case <-ctx.Done():
		kill()
		closeFiles((<-msg).files)
		return initAnswer{}, ctx.Err()
	case <-time.After(readyTimeout):
		kill()
		closeFiles((<-msg).files)
		return initAnswer{}, fmt.Errorf("sandbox init: not ready after %v", readyTimeout)
	}
}

// closeFiles closes every file of files.
func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
