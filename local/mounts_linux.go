package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local/internal/fuse"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

const (
	// mountReadyTimeout bounds the wait for a FUSE tool to mount and
	// answer, as Mastra's 60 s.
	mountReadyTimeout = 60 * time.Second
	// toolExitGrace is how long a FUSE tool has to exit by itself once its
	// mount is gone, before it is killed.
	toolExitGrace = 5 * time.Second
)

// mountNew mounts fs for the record r (new, not in m.Mounts yet) in the
// running sandbox of the locked folder dir, first storing its
// configuration so that later starts mount it again. On failure nothing
// is left: no tool, no files.
func mountNew(ctx context.Context, dir string, m *meta, r *mountRecord, fsys sandbox.Filesystem) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting buckets needs root (the FUSE tool runs on the host and its mount is moved into the sandbox)", sandbox.ErrIsolationUnavailable)
	}
	folder := mountFolder(dir, r.Key)
	_ = os.RemoveAll(folder) // a leftover of an interrupted attempt
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return err
	}
	if err := ensurePrivateDir(filepath.Dir(folder)); err != nil {
		return err
	}
	cfg, err := mount.Marshal(fsys)
	if err == nil {
		err = writePrivate(filepath.Join(folder, "config.json"), cfg)
	}
	if err == nil {
		err = mountRecordNow(ctx, dir, m, r, fsys)
	}
	if err != nil {
		_ = os.RemoveAll(folder)
		return err
	}
	return nil
}

// mountRecordNow runs the FUSE tool of r for fsys and moves its mount into
// the running sandbox m, recording the tool in r. On failure the tool is
// ended and its credential files removed (config.json stays).
func mountRecordNow(ctx context.Context, dir string, m *meta, r *mountRecord, fsys sandbox.Filesystem) (err error) {
	folder := mountFolder(dir, r.Key)
	creds, mnt := filepath.Join(folder, "creds"), filepath.Join(folder, "mnt")
	defer func() {
		if err != nil {
			_ = os.RemoveAll(creds)
		}
	}()
	for _, d := range []string{creds, mnt} {
		if err := ensurePrivateDir(d); err != nil {
			return err
		}
	}
	plan, err := mount.NewPlan(fsys, mount.PlanOptions{
		MountPoint: mnt, CredentialDir: creds, Owner: hostOwner(m),
		Foreground: true, AllowOther: true,
	})
	if err != nil {
		return err
	}
	r.ReadOnly = plan.ReadOnly
	tool, err := exec.LookPath(plan.Tool)
	if err != nil {
		return fmt.Errorf("%w: %s is not installed on the host (%v); install it (Debian: apt-get install s3fs; gcsfuse: see https://cloud.google.com/storage/docs/cloud-storage-fuse/install)", mount.ErrToolNotFound, plan.Tool, err)
	}
	for _, f := range plan.Files {
		if err := writePrivate(f.Path, f.Content); err != nil {
			return err
		}
	}
	rec, err := runTool(ctx, tool, plan, filepath.Join(folder, "tool.log"), r.Options)
	if err != nil {
		return err
	}
	for _, f := range plan.Files {
		if f.Transient {
			_ = os.Remove(f.Path)
		}
	}
	if err := placeMount(m, mnt, r.Path); err != nil {
		detachHost(mnt)
		stopTool(ctx, rec)
		return err
	}
	r.Tool, r.State, r.Error = rec, sandbox.MountMounted, ""
	return nil
}

// hostOwner returns the host ids that the user commands of the sandbox m
// run as maps to.
func hostOwner(m *meta) *mount.Owner {
	ids := m.HostIDs
	if ids == nil {
		return nil
	}
	if ids.Count <= 1 {
		return &mount.Owner{UID: ids.First, GID: ids.First}
	}
	uid, gid := 0, 0
	if m.RunAs != nil {
		uid, gid = m.RunAs.UID, m.RunAs.GID
	}
	return &mount.Owner{UID: ids.First + uid, GID: ids.First + gid}
}

// writePrivate writes a new file of mode 0600.
func writePrivate(path string, b []byte) error {
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// runTool starts the FUSE tool of plan in the foreground (its own
// session, its output to logPath), in o.Netns if set, and waits until
// its mount is in place and answers. It returns the running tool.
func runTool(ctx context.Context, tool string, plan *mount.Plan, logPath string, o MountOptions) (*initRecord, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := toolCommand(tool, plan, logf, o)
	if err := startTool(cmd, plan, o.Netns); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reap it when it ends while we live
		close(exited)
	}()
	st, _ := procStartTime(cmd.Process.Pid)
	rec := &initRecord{PID: cmd.Process.Pid, StartTime: st}
	if err := waitToolMounted(ctx, cmd, exited, plan, logPath); err != nil {
		return nil, err
	}
	return rec, nil
}

// toolCommand returns the command running the FUSE tool (its path tool)
// as plan says, writing its output to logf.
func toolCommand(tool string, plan *mount.Plan, logf *os.File, o MountOptions) *exec.Cmd {
	argv := append([]string{tool}, plan.Args...)
	if plan.EnvFile != "" {
		// The temporary credentials go into the tool's environment from
		// their file, never through an argument.
		argv = []string{"/bin/sh", "-c", `. "$1" && shift && exec "$@"`, "sh", plan.EnvFile, tool}
		argv = append(argv, plan.Args...)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "LANG=C.UTF-8"}
	env = append(env, plan.Env...)
	env = append(env, o.Env...)
	return &exec.Cmd{
		Path: argv[0], Args: argv, Env: env, Dir: "/",
		Stdout: logf, Stderr: logf,
		SysProcAttr: &unix.SysProcAttr{Setsid: true},
	}
}

// startTool starts cmd, in the network namespace netns when set.
func startTool(cmd *exec.Cmd, plan *mount.Plan, netns string) error {
	start := cmd.Start
	if netns != "" {
		ns, err := os.Open(netns)
		if err != nil {
			return fmt.Errorf("the FUSE tool's network namespace: %w", err)
		}
		defer ns.Close()
		// The child inherits the network namespace of the thread that
		// forks it.
		start = func() error { return inNetns(ns, cmd.Start) }
	}
	if err := start(); err != nil {
		return fmt.Errorf("start %s: %w", plan.Tool, err)
	}
	return nil
}

// waitToolMounted waits until the started tool cmd (exited once it ends)
// has mounted plan.MountPoint and the bucket answers, within
// mountReadyTimeout; on failure it ends the tool and detaches the mount.
func waitToolMounted(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}, plan *mount.Plan, logPath string) error {
	failed := func(why string) error {
		_ = cmd.Process.Kill()
		<-exited
		detachHost(plan.MountPoint)
		return fmt.Errorf("%s %s: %s", plan.Tool, why, toolOutput(plan, logPath))
	}
	deadline := time.NewTimer(mountReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !isFuseMount(plan.MountPoint) {
		select {
		case <-exited:
			return fmt.Errorf("%s failed to mount: %s", plan.Tool, toolOutput(plan, logPath))
		case <-ctx.Done():
			_ = failed("cancelled")
			return ctx.Err()
		case <-deadline.C:
			return failed(fmt.Sprintf("did not mount within %v", mountReadyTimeout))
		case <-tick.C:
		}
	}
	// The tool checks the bucket and credentials once mounted, and exits
	// if they fail: list the root (one request to the bucket) to be sure.
	select {
	case err := <-probeMount(plan.MountPoint):
		if err != nil {
			return failed(fmt.Sprintf("mounted, but the bucket cannot be read (%v)", err))
		}
	case <-deadline.C:
		return failed("mounted, but the bucket does not answer")
	}
	select {
	case <-exited:
		detachHost(plan.MountPoint)
		return fmt.Errorf("%s failed to mount: %s", plan.Tool, toolOutput(plan, logPath))
	default:
	}
	return nil
}

// probeMount lists the root of the mount at dir in the background; the
// channel gets the error (nil when it could).
func probeMount(dir string) <-chan error {
	probe := make(chan error, 1)
	go func() {
		f, err := os.Open(dir)
		if err == nil {
			_, err = f.ReadDir(1)
			f.Close()
		}
		if errors.Is(err, io.EOF) { // empty
			err = nil
		}
		probe <- err
	}()
	return probe
}

// toolOutput returns the last lines of a tool's log, without credentials.
func toolOutput(plan *mount.Plan, logPath string) string {
	b, _ := os.ReadFile(logPath)
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return "it said nothing"
	}
	// The lines of errors, when the tool marks them (s3fs: [CRT], [ERR]).
	var errs []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "[CRT]") || strings.Contains(line, "[ERR]") || strings.Contains(strings.ToLower(line), "error") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	if len(errs) > 0 {
		b = []byte(strings.Join(errs, "\n"))
	}
	return plan.Redact(string(b))
}

// isFuseMount reports whether a FUSE file system is mounted at p.
func isFuseMount(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && st.Type == fuse.SuperMagic
}

// detachHost detaches whatever is mounted at the host folder p.
func detachHost(p string) {
	for unix.Unmount(p, unix.MNT_DETACH) == nil {
	}
}

// placeMount moves (a clone of) the mount at the host folder mnt into the
// mount namespace of the running sandbox m at path, making the folders on
// the way (owned by the sandbox's user), then detaches the host's copy.
func placeMount(m *meta, mnt, path string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, mnt, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the mount: %w", err)
	}
	defer unix.Close(fd)
	owner := hostOwner(m)
	err = inSandboxMountNS(m, func() error {
		at, err := makeMountPoint(path, owner)
		if err != nil {
			return err
		}
		defer unix.Close(at)
		if err := unix.MoveMount(fd, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
			return fmt.Errorf("move the mount to %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	detachHost(mnt)
	return nil
}

// makeMountPoint makes path (in the sandbox's view: the caller entered
// its mount namespace) an empty folder, making missing parents owned by
// owner, and returns an O_PATH descriptor of it; a non-empty folder, a
// file or a mount point there is refused. The path resolves inside the
// sandbox's root without magic links (mkdirAllInRoot): a link the
// sandbox planted cannot lead the host's root anywhere else.
func makeMountPoint(path string, owner *mount.Owner) (int, error) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	uid, gid := -1, -1
	if owner != nil {
		uid, gid = owner.UID, owner.GID
	}
	fd, _, err := mkdirAllInRoot(root, path, 0o755, uid, gid)
	if errors.Is(err, unix.EROFS) {
		return -1, fmt.Errorf("%w: make the mount point %s: %v; this part of the sandbox's root is read-only: mount under its home or /tmp (or give it an image, whose root is writable)", mount.ErrInvalid, path, err)
	}
	if errors.Is(err, unix.ENOTDIR) {
		return -1, fmt.Errorf("%w: %s exists in the sandbox and is not a folder", mount.ErrInvalid, path)
	}
	if err != nil {
		return -1, fmt.Errorf("make the mount point %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	var st, parent unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if err := unix.Fstatat(fd, "..", &parent, unix.AT_SYMLINK_NOFOLLOW); err == nil && parent.Dev != st.Dev && path != "/" {
		return -1, fmt.Errorf("%w: something is mounted at %s already", mount.ErrInvalid, path)
	}
	dir, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	f := os.NewFile(uintptr(dir), path)
	names, _ := f.Readdirnames(1)
	f.Close()
	if len(names) > 0 {
		return -1, fmt.Errorf("%w: cannot mount at %s: the folder exists and is not empty, and mounting would hide its files; use another path or empty it first", mount.ErrInvalid, path)
	}
	ok = true
	return fd, nil
}

// inSandboxMountNS runs f on a throwaway thread that entered the mount
// namespace of the running sandbox m (its root and working directory
// become the sandbox's root).
func inSandboxMountNS(m *meta, f func() error) error {
	if m.Init == nil {
		return &sandbox.NotReadyError{ID: m.ID}
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(m.Init.PID) + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("the sandbox's mount namespace: %w", err)
	}
	defer ns.Close()
	if st, ok := procStartTime(m.Init.PID); !ok || st != m.Init.StartTime {
		return &sandbox.NotReadyError{ID: m.ID, Err: errors.New("its init has ended")}
	}
	return onThrowawayThread(func() error {
		// A thread sharing its file system attributes with others (as
		// every thread of a Go program does) may not change mount
		// namespace.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare the file system attributes: %w", err)
		}
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the sandbox's mount namespace: %w", err)
		}
		return f()
	})
}

// unmountRecord ends the mount r of the sandbox m: it detaches it inside
// the sandbox (if it runs), which ends the tool, then removes its folder
// (credentials included).
func unmountRecord(ctx context.Context, dir string, m *meta, r *mountRecord) error {
	if r.Tool != nil && m.alive() {
		err := inSandboxMountNS(m, func() error {
			// The path resolves inside the sandbox's root, and only a FUSE
			// mount there is detached: a link the sandbox put at the
			// mount's place leads to none of the host's mounts.
			fd, err := openInRoot(unix.AT_FDCWD, "/", unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				return fmt.Errorf("unmount %s: the sandbox's root: %w", r.Path, err)
			}
			defer unix.Close(fd)
			at, err := openInRoot(fd, r.Path, unix.O_PATH|unix.O_DIRECTORY)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil // gone
			}
			if err != nil {
				return fmt.Errorf("unmount %s: %w", r.Path, err)
			}
			defer unix.Close(at)
			var st unix.Statfs_t
			if unix.Fstatfs(at, &st) != nil || st.Type != fuse.SuperMagic {
				return nil // not mounted there (any more)
			}
			// The sandbox's /proc does not show this thread: the mount is
			// named as the working directory (of this throwaway thread
			// alone, CLONE_FS unshared).
			if err := unix.Fchdir(at); err != nil {
				return fmt.Errorf("unmount %s: %w", r.Path, err)
			}
			if err := unix.Unmount(".", unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", r.Path, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if r.Tool != nil {
		stopTool(ctx, r.Tool)
		r.Tool = nil
	}
	folder := mountFolder(dir, r.Key)
	detachHost(filepath.Join(folder, "mnt"))
	return os.RemoveAll(folder)
}

// stopTool waits for the FUSE tool rec to exit (it does once its last
// mount is gone), then ends it.
func stopTool(ctx context.Context, rec *initRecord) {
	pfd, err := unix.PidfdOpen(rec.PID, 0)
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	if st, alive := procStartTime(rec.PID); !alive || st != rec.StartTime {
		return
	}
	if waitPidfd(ctx, pfd, toolExitGrace) {
		return
	}
	terminate(context.WithoutCancel(ctx), *rec)
}

// stopMounts ends the FUSE tools of the sandbox m, whose init has ended
// (its mount namespace with it): the mounts stay recorded, pending the
// next start.
func stopMounts(ctx context.Context, dir string, m *meta) {
	for i := range m.Mounts {
		r := &m.Mounts[i]
		if r.Tool != nil {
			stopTool(ctx, r.Tool)
			r.Tool = nil
		}
		detachHost(filepath.Join(mountFolder(dir, r.Key), "mnt"))
		_ = os.RemoveAll(filepath.Join(mountFolder(dir, r.Key), "creds"))
		if r.State == sandbox.MountMounted || r.State == sandbox.MountMounting {
			r.State = sandbox.MountPending
		}
	}
}

// remountAll mounts the recorded mounts of the sandbox m, which has just
// started, each from its stored configuration. A failure is recorded in
// the mount's state, never fails the start.
func remountAll(ctx context.Context, dir string, m *meta) {
	for i := range m.Mounts {
		r := &m.Mounts[i]
		b, err := os.ReadFile(filepath.Join(mountFolder(dir, r.Key), "config.json"))
		var fsys sandbox.Filesystem
		if err == nil {
			fsys, err = mount.Unmarshal(b)
		}
		if err == nil {
			err = mountRecordNow(ctx, dir, m, r, fsys)
		}
		if err != nil {
			r.State, r.Error, r.Tool = sandbox.MountError, err.Error(), nil
			if errors.Is(err, mount.ErrToolNotFound) {
				r.State = sandbox.MountUnavailable
			}
		}
	}
}
