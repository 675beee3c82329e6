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
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// initEnv is the environment variable that marks a re-executed sandbox
// init.
const initEnv = "_AGENTBOX_SANDBOX_INIT"

// fdControl is the init's end of the control socket (SOCK_SEQPACKET): the
// host sends one message, the initConfig as JSON with the descriptors it
// names; the init answers "ok" once it serves, or an error message.
const fdControl = 3

// initTmpDir is the init's TMPDIR inside the sandbox, bound from the
// toolboxDir folder of the sandbox's state folder.
const initTmpDir = "/run/agentbox"

// initConfig is what the host tells the init.
type initConfig struct {
	ID          string     `json:"id"`
	Hostname    string     `json:"hostname"`
	Home        string     `json:"home"`
	WorkDir     string     `json:"workDir"`
	Env         []string   `json:"env"`
	Binds       []bindSpec `json:"binds"`
	NetworkNone bool       `json:"networkNone"`
	AutoStop    int64      `json:"autoStopNanos"` // <= 0: never
}

// bindSpec binds a host folder at Target.
type bindSpec struct {
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// FD, when >= 0, indexes the descriptors sent with the configuration:
	// a detached mount (open_tree) to move in place. Otherwise Path is
	// opened by the init itself before it hides the host's /tmp.
	FD   int    `json:"fd"`
	Path string `json:"path,omitempty"`
}

// Init runs the sandbox init when this process is one, and never returns
// then; otherwise it returns at once. Call it first thing in main, and in
// TestMain of tests that start local sandboxes: a local sandbox's PID 1 is
// the same binary re-executed.
//
// The package's own initialisation calls Init too, so a program that
// forgets it still never runs its main as a sandbox init; the explicit call
// documents the re-execution where a reader of main looks for it.
func Init() {
	if _, ok := os.LookupEnv(initEnv); !ok {
		return
	}
	os.Unsetenv(initEnv)
	ctl := os.NewFile(fdControl, "control")
	cfg, fds, err := receiveConfig(ctl)
	if err != nil {
		initFail(ctl, err)
	}
	// Keep the init lean: it idles most of its life.
	debug.SetGCPercent(50)
	if err := setupRoot(cfg, fds); err != nil {
		initFail(ctl, err)
	}
	os.Exit(runInit(cfg, ctl, fds[0]))
}

func init() { Init() }

// receiveConfig reads the host's one message. The descriptors arrive
// close-on-exec; the first is the toolbox socket.
func receiveConfig(ctl *os.File) (*initConfig, []int, error) {
	buf := make([]byte, 1<<16)
	oob := make([]byte, unix.CmsgSpace(64*4))
	n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("read configuration: %w", err)
	}
	if n == 0 {
		return nil, nil, errors.New("the host went away before the sandbox started")
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, nil, err
	}
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, nil, err
		}
		fds = append(fds, r...)
	}
	var cfg initConfig
	if err := json.Unmarshal(buf[:n], &cfg); err != nil {
		return nil, nil, fmt.Errorf("bad init configuration: %w", err)
	}
	if len(fds) == 0 {
		return nil, nil, errors.New("no toolbox socket received")
	}
	for _, b := range cfg.Binds {
		if b.FD >= len(fds) {
			return nil, nil, errors.New("bad init configuration: missing descriptor")
		}
	}
	return &cfg, fds, nil
}

// initFail reports err to the host through the control socket and exits.
func initFail(ctl *os.File, err error) {
	ctl.WriteString(err.Error())
	ctl.Close()
	os.Exit(1)
}

// setupRoot builds the sandbox's file system view and identity. It runs in
// the new namespaces, as uid 0 of the new user namespace, before anything
// of the user runs.
func setupRoot(cfg *initConfig, fds []int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Open the bind sources given by path now, while the host's /tmp (where
	// a state dir may live) is still visible.
	srcFD := make([]int, len(cfg.Binds))
	for i, b := range cfg.Binds {
		if b.FD >= 0 {
			srcFD[i] = fds[b.FD]
			continue
		}
		fd, err := unix.Open(b.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", b.Path, err)
		}
		srcFD[i] = fd
	}
	// The new root is a small tmpfs mounted over /tmp, which every Linux
	// host has and everyone may traverse. Our mount namespace is private, so
	// the host's /tmp is untouched.
	root := "/tmp"
	if err := unix.Mount("agentbox-root", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	at := func(p string) string { return filepath.Join(root, p) }

	// System folders, read-only.
	var roTargets []string
	for _, d := range []string{"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt"} {
		fi, err := os.Lstat("/" + d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink("/" + d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, at(d)); err != nil {
				return fmt.Errorf("link /%s: %w", d, err)
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if err := os.Mkdir(at(d), 0o755); err != nil {
			return err
		}
		if err := unix.Mount("/"+d, at(d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /%s: %w", d, err)
		}
		roTargets = append(roTargets, at(d))
	}

	// /proc, fresh for our pid namespace.
	if err := os.Mkdir(at("proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", at("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := setupDev(at("dev")); err != nil {
		return err
	}

	// Writable, persistent folders and volumes, parents first.
	type bind struct {
		fd int
		bindSpec
	}
	binds := make([]bind, len(cfg.Binds))
	for i, s := range cfg.Binds {
		binds[i] = bind{srcFD[i], s}
	}
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(binds[i].Target, "/") < strings.Count(binds[j].Target, "/")
	})
	for _, b := range binds {
		t := at(b.Target)
		if err := os.MkdirAll(t, 0o755); err != nil {
			return fmt.Errorf("create mount point %s: %w", b.Target, err)
		}
		if b.FD >= 0 {
			if err := unix.MoveMount(b.fd, "", unix.AT_FDCWD, t, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("bind %s: %w", b.Target, err)
			}
		} else {
			src := "/proc/self/fd/" + strconv.Itoa(b.fd)
			if err := unix.Mount(src, t, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind %s: %w", b.Target, err)
			}
		}
		if b.ReadOnly {
			roTargets = append(roTargets, t)
		}
		unix.Close(b.fd)
	}
	for _, d := range []string{cfg.Home, cfg.WorkDir} {
		if err := os.MkdirAll(at(d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(at("var"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("../tmp", at("var/tmp")); err != nil {
		return err
	}
	if err := os.MkdirAll(at("run"), 0o755); err != nil {
		return err
	}
	// /etc/resolv.conf often links into /run (systemd-resolved): bring the
	// file it names along, read-only, so that name resolution works.
	if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && strings.HasPrefix(t, "/run/") && !strings.HasPrefix(t, initTmpDir) {
		if err := os.MkdirAll(filepath.Dir(at(t)), 0o755); err == nil {
			if f, err := os.OpenFile(at(t), os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				if unix.Mount(t, at(t), "", unix.MS_BIND, "") == nil {
					roTargets = append(roTargets, at(t))
				}
			}
		}
	}
	if err := remountReadOnly(roTargets); err != nil {
		return err
	}

	// Switch root.
	if err := os.Mkdir(at(".oldroot"), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, at(".oldroot")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if cfg.NetworkNone {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bring up loopback: %w", err)
		}
	}
	return os.Chdir(cfg.WorkDir)
}

// remountReadOnly makes every mount at or under the targets read-only,
// keeping the flags a user namespace may not clear.
func remountReadOnly(targets []string) error {
	if len(targets) == 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		match := false
		for _, t := range targets {
			if mp == t || strings.HasPrefix(mp, t+"/") {
				match = true
			}
		}
		if !match {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mp, &st); err != nil {
			continue // e.g. an unreachable autofs point
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for _, p := range [][2]int64{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
			{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if st.Flags&p[0] != 0 {
				flags |= uintptr(p[1])
			}
		}
		if err := unix.Mount("", mp, "", flags, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", strings.TrimPrefix(mp, "/tmp"), err)
		}
	}
	return nil
}

// setupDev makes a minimal /dev: a few host nodes bound in, symlinks, a
// private devpts and /dev/shm.
func setupDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("agentbox-dev", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := filepath.Join(dev, n)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
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

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// runInit is PID 1 of the sandbox: it serves the toolbox API, reaps
// orphans, stops itself when idle and shuts down on SIGTERM.
func runInit(cfg *initConfig, ctl *os.File, lnFD int) int {
	lf := os.NewFile(uintptr(lnFD), "toolbox.sock")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		initFail(ctl, fmt.Errorf("toolbox socket: %w", err))
	}
	os.Clearenv()
	for _, kv := range cfg.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	// The server keeps its files out of the user's /tmp.
	os.Setenv("TMPDIR", initTmpDir)
	d, err := daemon.New(daemon.Options{
		WorkDir: cfg.WorkDir, HomeDir: cfg.Home, Env: cfg.Env, DropCapabilities: true,
		// The init was cloned into a cgroup namespace rooted where it was
		// born; on cgroup v1 the host moves it into its own cgroups only
		// afterwards (before sending the configuration), so commands would
		// see host cgroup paths. A namespace unshared now, on the thread
		// that starts every command, is rooted at the sandbox's cgroups
		// (on v2 it is rooted where the first one already was).
		StartThreadSetup: func() error { return unix.Unshare(unix.CLONE_NEWCGROUP) },
	})
	if err != nil {
		initFail(ctl, fmt.Errorf("toolbox server: %w", err))
	}
	act := newActivity(filepath.Join(initTmpDir, activityFile))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			act.begin()
			defer act.end()
			d.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: time.Minute,
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGCHLD)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	ctl.WriteString("ok")
	ctl.Close()

	var tick <-chan time.Time
	idle := time.Duration(cfg.AutoStop)
	if idle > 0 {
		t := time.NewTicker(min(max(idle/4, 50*time.Millisecond), 30*time.Second))
		defer t.Stop()
		tick = t.C
	}
	reason := "stopped"
loop:
	for {
		select {
		case s := <-sigs:
			if s == unix.SIGCHLD {
				reapOrphans()
				continue
			}
			reason = "signal " + s.String()
			break loop
		case <-tick:
			reapOrphans()
			if act.idleFor(idle) {
				reason = "idle"
				break loop
			}
			act.refresh()
		case err := <-served:
			reason = fmt.Sprintf("toolbox server ended: %v", err)
			break loop
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
	_ = srv.Close()
	_ = d.Close()
	// As PID 1 of the namespace, kill(-1) reaches every other process in it.
	_ = unix.Kill(-1, unix.SIGKILL)
	for {
		if _, err := unix.Wait4(-1, nil, 0, nil); errors.Is(err, unix.ECHILD) {
			break
		}
	}
	writeExitRecord(reason)
	return 0
}

// activity tracks the use of the toolbox API: in memory for the auto-stop,
// and for host processes (Info.LastUsedAt) as the mtime of a stamp file in
// the state folder, written at most about once a second and never more
// than a second behind.
type activity struct {
	last     atomic.Int64 // unix nanoseconds of the last request start or end
	inflight atomic.Int64 // requests being served
	stamped  atomic.Int64 // the stamp's mtime, unix nanoseconds
	pending  atomic.Bool  // a delayed stamp is scheduled
	mu       sync.Mutex   // orders the stamp's writes
	// f is the stamp, kept open for the init's life (the sandbox may
	// replace its path) and changed through path, its /proc/self/fd link;
	// nil without a stamp.
	f    *os.File
	path string
}

// newActivity creates the stamp file at path and marks now as the last use.
// Without a stamp (e.g. the folder is full) only the auto-stop works.
func newActivity(path string) *activity {
	a := &activity{}
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o644); err == nil {
		a.f, a.path = f, "/proc/self/fd/"+strconv.Itoa(int(f.Fd()))
	}
	now := time.Now().UnixNano()
	a.last.Store(now)
	a.stamp(now)
	return a
}

func (a *activity) begin() {
	a.inflight.Add(1)
	a.touch()
}

func (a *activity) end() {
	a.touch()
	a.inflight.Add(-1)
}

// touch marks now as the last use. It writes the stamp when it is a second
// old, else schedules the write a second later.
func (a *activity) touch() {
	now := time.Now().UnixNano()
	a.last.Store(now)
	if now-a.stamped.Load() >= int64(time.Second) {
		a.stamp(now)
		return
	}
	if a.pending.CompareAndSwap(false, true) {
		time.AfterFunc(time.Second, func() {
			a.pending.Store(false)
			a.stamp(a.last.Load())
		})
	}
}

// refresh stamps now while a request is being served (a long command or a
// log follow keeps the sandbox in use).
func (a *activity) refresh() {
	if a.inflight.Load() > 0 {
		a.stamp(time.Now().UnixNano())
	}
}

// idleFor reports whether no request ran for d.
func (a *activity) idleFor(d time.Duration) bool {
	return a.inflight.Load() == 0 && time.Since(time.Unix(0, a.last.Load())) >= d
}

// stamp sets the stamp's mtime to t (unix nanoseconds) unless it is newer.
func (a *activity) stamp(t int64) {
	if a.f == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t <= a.stamped.Load() {
		return
	}
	a.stamped.Store(t)
	ts := unix.NsecToTimespec(t)
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, a.path, []unix.Timespec{ts, ts}, 0)
}

// writeExitRecord tells host processes when and why the init ended.
func writeExitRecord(reason string) {
	b, _ := json.Marshal(exitRecord{StoppedAt: time.Now().UTC(), Reason: reason})
	_ = os.WriteFile(filepath.Join(initTmpDir, exitFile), b, 0o644)
}

// reapOrphans reaps the zombies that no one else will wait for: children
// of PID 1 that the toolbox server did not start itself. Processes started
// through os/exec are held by a pidfd in this process and are left to their
// Wait.
func reapOrphans() {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var held map[int]bool
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] != "Z" || f[1] != "1" {
			continue
		}
		if held == nil {
			held = heldPidfds()
		}
		if held[pid] {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// heldPidfds returns the pids this process holds a pidfd for.
func heldPidfds() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return out
	}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.Index(s, "\nPid:"); i >= 0 {
			line := s[i+5:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
				out[pid] = true
			}
		}
	}
	return out
}
