package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local/internal/fuse"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// initEnv is the environment variable that marks a re-executed sandbox
// init.
const initEnv = "_AGENTBOX_SANDBOX_INIT"

// initSpare is initEnv's value for the spare init of a Pool, which says
// spareWaiting on its control socket once it waits for its configuration.
const (
	initSpare    = "spare"
	spareWaiting = "waiting"
)

// initTmpDir is the init's TMPDIR inside the sandbox, bound from the
// toolboxDir folder of the sandbox's state folder.
const initTmpDir = "/run/agentbox"

// initMain runs the sandbox init when this process is one (see Init): it
// reads its configuration, runs the steps of initSteps in order, then
// serves as the sandbox's PID 1 until it stops, and exits.
func initMain() {
	kind, ok := os.LookupEnv(initEnv)
	if !ok {
		return
	}
	os.Unsetenv(initEnv)
	closeInherited()
	ctl := os.NewFile(fdControl, "control")
	if kind == initSpare {
		// A Pool's spare: the host waits for this before it counts it.
		if _, err := ctl.Write([]byte(spareWaiting)); err != nil {
			os.Exit(1)
		}
	}
	cfg, fds, err := receiveConfig(ctl)
	if err != nil {
		initFail(ctl, err)
	}
	// The init idles most of its life. The default GC target, not a lower
	// one: with GOGC=50 the packages' own start-up allocations (go-git's
	// among them) crossed the first 2 MB target, and the cycle that ran
	// left 0.4 MB more resident in every idle init (2.99 vs 2.59 MB PSS per
	// sandbox in BenchmarkIdleMemory).
	debug.SetGCPercent(100)
	if err := runSteps(initSteps(cfg, fds)); err != nil {
		initFail(ctl, err)
	}
	os.Exit(runInit(cfg, ctl, fds))
}

// closeInherited closes the descriptors above the control socket that the
// init inherited from the program that started it: those its parent held
// without close-on-exec (a shell's or a supervisor's leaked pipe or file),
// which are the host's objects. Every descriptor the init makes itself,
// the Go runtime's among them, is close-on-exec, so those stay.
func closeInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= fdControl {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// sandboxStdio replaces the init's standard input, output and error, the
// host's /dev/null its parent gave it, by the sandbox's: the init holds
// no descriptor of a host mount.
func sandboxStdio() error {
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for i := range 3 {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return err
		}
	}
	return nil
}

// namedStep is one named step of a start: of the init's setup
// (initSteps), of the setup of its command thread (commandThreadSteps), of
// the host's side (booting.steps).
type namedStep struct {
	name string
	run  func() error
}

// initSteps lists the setup of the sandbox, in order: its file system view
// (rootfs_linux.go), identity and network. They run in the new namespaces,
// as uid 0 of the new user namespace, before anything of the user runs.
func initSteps(cfg *initConfig, fds []int) []namedStep {
	r := &rootfs{cfg: cfg, fds: fds}
	return []namedStep{
		{"make mounts private", r.makePrivate},
		{"open bind sources", r.openSources},
		{"mount the root tmpfs", r.mountRoot},
		{"bind system folders", r.bindSystem},
		{"name the sandbox's user", r.nameUser},
		{"mount /proc", r.mountProc},
		{"make /dev", r.makeDev},
		{"mask host-wide /proc files", r.maskProc},
		{"bind state folders and volumes", r.bindState},
		{"make folders", r.makeFolders},
		{"bind resolv.conf", r.bindResolvConf},
		{"make system folders read-only", r.remountReadOnly},
		{"make the TUN device", func() error { return openTun(cfg) }},
		{"pivot_root", r.pivot},
		{"make / read-only", r.rootReadOnly},
		{"set hostname", func() error { return unix.Sethostname([]byte(cfg.hostname())) }},
		{"set up network", func() error { return setupNetwork(cfg.Net) }},
		{"listen for the egress proxy", func() error { return listenForEgress(cfg) }},
		{"configure the TUN device", func() error { return tunUp(cfg) }},
		{"enter working directory", func() error { return os.Chdir(cfg.WorkingDirectory) }},
		{"take stdio from the sandbox's /dev/null", sandboxStdio},
		{"make the init non-dumpable", makeUndumpable},
	}
}

// runSteps runs steps in order and stops at the first failure, which it
// reports with the step's name.
func runSteps(steps []namedStep) error {
	for _, s := range steps {
		if err := s.run(); err != nil {
			return fmt.Errorf("step %q: %w", s.name, err)
		}
	}
	return nil
}

// initFail reports err to the host through the control socket and exits.
func initFail(ctl *os.File, err error) {
	ctl.WriteString(err.Error())
	ctl.Close()
	os.Exit(1)
}

// runInit is PID 1 of the sandbox: it serves the toolbox API on the
// listening socket fds[0], reaps orphans, stops itself when idle and shuts
// down on SIGTERM. It tells the host "ok" on ctl once it serves, handing
// over what the setup steps made for it.
func runInit(cfg *initConfig, ctl *os.File, fds []int) int {
	lf := os.NewFile(uintptr(fds[0]), socketFile)
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		initFail(ctl, fmt.Errorf("toolbox socket: %w", err))
	}
	env := cfg.env()
	setEnv(env)
	p, err := newPID1(cfg, env, fds)
	if err != nil {
		initFail(ctl, fmt.Errorf("toolbox server: %w", err))
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGCHLD)
	go func() { p.served <- p.srv.Serve(ln) }()

	sendReady(ctl, cfg.egressFDs, cfg.handOver)
	ctl.Close()

	reason := p.wait(sigs)
	p.shutdown()
	writeExitRecord(p.exit, reason)
	return 0
}

// setEnv makes env the init's environment.
func setEnv(env []string) {
	os.Clearenv()
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	// The server keeps its files out of the user's /tmp.
	os.Setenv("TMPDIR", initTmpDir)
}

// pid1 is the running init: its toolbox server and what its loop watches.
type pid1 struct {
	d      *daemon.Server
	srv    *http.Server
	act    *activity
	served chan error    // the server's end
	idle   time.Duration // AutoStopInterval; <= 0: never
	exit   string        // the path of the exit record
}

// newPID1 makes the init's toolbox server, not serving yet.
func newPID1(cfg *initConfig, env []string, fds []int) (*pid1, error) {
	notifyFD := -1
	d, err := daemon.New(daemon.Options{
		WorkDir: cfg.WorkingDirectory, HomeDir: cfg.userHome(), Env: env, DropCapabilities: true,
		KeepCapabilities: cfg.keptCapabilities(),
		Credential:       cfg.credential(),
		Entrypoint:       cfg.Root.entrypoint(),
		Daytona:          cfg.DaytonaToolbox,
		Cgroups:          cfg.metricsCgroups(fds),
		StartThreadSetup: func() error {
			return runSteps(commandThreadSteps(cfg, fds, &notifyFD))
		},
	})
	if err != nil {
		return nil, err
	}
	if notifyFD >= 0 {
		sup, err := fuse.NewSupervisor(notifyFD, cfg.Confinement.AllowNestedNamespaces || cfg.Confinement.Unconfined, fuseForbiddenTargets)
		if err != nil {
			d.Close()
			return nil, err
		}
		go sup.Serve()
	}
	p := &pid1{d: d, served: make(chan error, 1), idle: cfg.AutoStopInterval, exit: cfg.exitPath(fds)}
	p.act = newActivity(cfg.activityPath(fds))
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !passive(r) {
				p.act.begin()
				defer p.act.end()
			}
			d.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: time.Minute,
	}
	return p, nil
}

// wait runs the init's loop until it is to stop, and returns why: a
// signal, idleness, or the end of the server. It reaps orphans on SIGCHLD
// and at every tick of the idle check.
func (p *pid1) wait(sigs <-chan os.Signal) string {
	var tick <-chan time.Time
	if p.idle > 0 {
		t := time.NewTicker(min(max(p.idle/4, 50*time.Millisecond), 30*time.Second))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case s := <-sigs:
			if s != unix.SIGCHLD {
				return "signal " + s.String()
			}
			reapOrphans()
		case <-tick:
			reapOrphans()
			if p.act.idleFor(p.idle) {
				return "idle"
			}
			p.act.refresh()
		case err := <-p.served:
			return fmt.Sprintf("toolbox server ended: %v", err)
		}
	}
}

// shutdown stops the server, then ends every other process of the
// sandbox and reaps them.
func (p *pid1) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = p.srv.Shutdown(ctx)
	cancel()
	_ = p.srv.Close()
	_ = p.d.Close()
	// As PID 1 of the namespace, kill(-1) reaches every other process in it.
	_ = unix.Kill(-1, unix.SIGKILL)
	for {
		if _, err := unix.Wait4(-1, nil, 0, nil); errors.Is(err, unix.ECHILD) {
			return
		}
	}
}

// writeExitRecord tells host processes, in the file path, when and why
// the init ended.
func writeExitRecord(path, reason string) {
	b, _ := json.Marshal(exitRecord{StoppedAt: time.Now().UTC(), Reason: reason})
	_ = os.WriteFile(path, b, 0o644)
}
