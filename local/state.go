package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Layout of a state dir:
//
//	<StateDir>/sandboxes/<id>/meta.json     metadata, pid and cgroups of the running init
//	<StateDir>/sandboxes/<id>/toolbox.sock  the init's toolbox API
//	<StateDir>/sandboxes/<id>/home/         /home/<user>
//	<StateDir>/sandboxes/<id>/tmp/          /tmp
//	<StateDir>/sandboxes/<id>/workdir/      the working directory, when outside home and /tmp
//	<StateDir>/sandboxes/<id>/toolbox/      the toolbox server's files, the init's exit
//	                                        record and its activity stamp (/run/agentbox
//	                                        inside), emptied each boot
//
// One file holds everything a host process needs: creating files is the
// slowest step of a start on some disks.
//
//	<StateDir>/volumes/<name>/              named volumes
const (
	sandboxesDir = "sandboxes"
	volumesDir   = "volumes"
	metaFile     = "meta.json"
	socketFile   = "toolbox.sock"
	exitFile     = "exit.json"
	activityFile = "last-used" // its mtime is when the toolbox API was last used
	toolboxDir   = "toolbox"
)

// meta is the persistent description of a sandbox.
type meta struct {
	ID         string            `json:"id"`
	Name       string            `json:"name,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	Status     sandbox.Status    `json:"status"` // last status written by a host process
	StoppedAt  time.Time         `json:"stoppedAt,omitzero"`
	LastUsedAt time.Time         `json:"lastUsedAt,omitzero"` // as of the last stop; see lastUsed
	Options    metaOptions       `json:"options"`
	// Init and Cgroups describe the running init; nil when stopped.
	Init    *initRecord `json:"init,omitempty"`
	Cgroups *cgroupSet  `json:"cgroups,omitempty"`
}

// metaOptions are the options that shape the sandbox and survive restarts.
type metaOptions struct {
	User               string        `json:"user"`
	Language           string        `json:"language"`
	WorkingDirectory   string        `json:"workingDirectory"`
	Timeout            time.Duration `json:"timeout"`
	Ephemeral          bool          `json:"ephemeral,omitempty"`
	AutoStopInterval   time.Duration `json:"autoStopInterval"`
	AutoDeleteInterval time.Duration `json:"autoDeleteInterval,omitempty"`
	Volumes            []Volume      `json:"volumes,omitempty"`
	NetworkBlockAll    bool          `json:"networkBlockAll,omitempty"`
}

// initRecord identifies a running init process.
type initRecord struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22
}

// exitRecord is written by the init when it ends by itself or on SIGTERM.
type exitRecord struct {
	StoppedAt time.Time `json:"stoppedAt"`
	Reason    string    `json:"reason"`
}

func sandboxDir(stateDir, id string) string {
	return filepath.Join(stateDir, sandboxesDir, id)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes v to path atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// procStartTime returns the start time of pid and whether it is alive
// (exists and is not a zombie).
func procStartTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 {
		return 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return st, f[0] != "Z" && f[0] != "X"
}

// alive reports whether the init recorded in m runs.
func (m *meta) alive() bool {
	if m.Init == nil || m.Init.PID <= 0 {
		return false
	}
	st, ok := procStartTime(m.Init.PID)
	return ok && st == m.Init.StartTime
}

// liveInit returns the init record of the sandbox folder dir if its init
// runs.
func liveInit(dir string) (initRecord, bool) {
	var m meta
	if err := readJSON(filepath.Join(dir, metaFile), &m); err != nil || !m.alive() {
		return initRecord{}, false
	}
	return *m.Init, true
}

// lockedDir is a sandbox folder held under an exclusive flock.
type lockedDir struct {
	path string
	f    *os.File
}

// lockSandbox creates (if create) and locks the folder of id. It retries
// when the folder is removed while waiting for the lock.
func lockSandbox(ctx context.Context, stateDir, id string, create bool) (*lockedDir, error) {
	dir := sandboxDir(stateDir, id)
	for {
		if create {
			if err := os.MkdirAll(dir, 0o711); err != nil {
				return nil, stateDirError(stateDir, err)
			}
		}
		f, err := os.Open(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if create {
					continue
				}
				return nil, notFound(stateDir, id)
			}
			return nil, stateDirError(stateDir, err)
		}
		if err := flockCtx(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		// The folder may have been removed (and maybe re-created) while we
		// waited: retry unless the path still names what we locked.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(dir, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return &lockedDir{path: dir, f: f}, nil
		}
		f.Close()
		if !create {
			if _, err := os.Stat(dir); err != nil {
				return nil, notFound(stateDir, id)
			}
		}
	}
}

func flockCtx(ctx context.Context, f *os.File) error {
	for delay := time.Millisecond; ; delay = min(delay*2, 20*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

func (l *lockedDir) unlock() {
	if l != nil && l.f != nil {
		l.f.Close() // releases the flock
		l.f = nil
	}
}

// notFound is the error for a sandbox id that stateDir does not hold.
func notFound(stateDir, id string) error {
	return fmt.Errorf("sandbox %q in %s: %w", id, stateDir, sandbox.ErrNotFound)
}

// resolveID returns the state dir to use (DefaultStateDir when stateDir is
// empty) after checking id.
func resolveID(stateDir, id string) (string, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	return stateDir, ValidateID(id)
}

// lockExisting resolves stateDir and locks the folder of the existing
// sandbox id.
func lockExisting(ctx context.Context, stateDir, id string) (string, *lockedDir, error) {
	stateDir, err := resolveID(stateDir, id)
	if err != nil {
		return stateDir, nil, err
	}
	l, err := lockSandbox(ctx, stateDir, id, false)
	return stateDir, l, err
}

func stateDirError(stateDir string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("state dir %s is not writable (%w); set Options.StateDir or AGENTBOX_STATE_DIR to a folder you can write", stateDir, err)
	}
	return fmt.Errorf("state dir %s: %w", stateDir, err)
}

func statusOf(m *meta) sandbox.Status {
	if m.alive() {
		return sandbox.StatusRunning
	}
	return sandbox.StatusStopped
}

// lastUsed returns when the sandbox of the folder dir was last used: the
// later of the time recorded in m and the mtime of the init's activity
// stamp. The stamp is writable from inside the sandbox, so only its mtime
// is read, capped at now.
func lastUsed(dir string, m *meta) time.Time {
	t := m.LastUsedAt
	fi, err := os.Lstat(filepath.Join(dir, toolboxDir, activityFile))
	if err != nil || !fi.Mode().IsRegular() {
		return t
	}
	mt := fi.ModTime().UTC()
	if now := time.Now().UTC(); mt.After(now) {
		mt = now
	}
	if mt.After(t) {
		t = mt
	}
	return t
}

// infoFrom describes the sandbox of the folder dir whose metadata is m.
func infoFrom(dir string, m *meta) *sandbox.Info {
	info := &sandbox.Info{
		ID:         m.ID,
		Name:       "LocalSandbox",
		Provider:   "local",
		Status:     statusOf(m),
		CreatedAt:  m.CreatedAt,
		LastUsedAt: lastUsed(dir, m),
		Metadata:   map[string]string{},
	}
	if info.Status == sandbox.StatusRunning && m.Options.AutoStopInterval > 0 && !info.LastUsedAt.IsZero() {
		// The init stops itself this long after the last request (at its
		// next check, a quarter of the interval later at most).
		info.TimeoutAt = info.LastUsedAt.Add(m.Options.AutoStopInterval)
	}
	for k, v := range m.Labels {
		info.Metadata[k] = v
	}
	info.Metadata["user"] = m.Options.User
	info.Metadata["language"] = m.Options.Language
	info.Metadata["ephemeral"] = strconv.FormatBool(m.Options.Ephemeral)
	if m.Name != "" {
		info.Metadata["name"] = m.Name
	}
	for _, v := range m.Options.Volumes {
		info.Mounts = append(info.Mounts, sandbox.MountInfo{Path: v.MountPath, Filesystem: "volume:" + v.Name})
	}
	if info.Status == sandbox.StatusRunning && m.Cgroups != nil {
		info.Resources = m.Cgroups.resources()
	}
	return info
}

// List describes every sandbox in stateDir with its live status. Stopped
// sandboxes past their AutoDeleteInterval and stopped ephemeral sandboxes
// are removed first.
func List(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	ents, err := os.ReadDir(filepath.Join(stateDir, sandboxesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, stateDirError(stateDir, err)
	}
	var out []sandbox.Info
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".trash-") {
			// Left by a removal that was interrupted.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = removeAll(filepath.Join(stateDir, sandboxesDir, e.Name()))
			}
			continue
		}
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		info, err := Lookup(ctx, stateDir, e.Name())
		if err != nil {
			continue
		}
		out = append(out, *info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Lookup describes the sandbox id in stateDir. It fails with an error
// matching sandbox.ErrNotFound when there is none.
func Lookup(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	stateDir, err := resolveID(stateDir, id)
	if err != nil {
		return nil, err
	}
	dir := sandboxDir(stateDir, id)
	var m meta
	if err := readJSON(filepath.Join(dir, metaFile), &m); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notFound(stateDir, id)
		}
		return nil, fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	if expired(dir, &m) {
		if err := Remove(ctx, stateDir, id); err == nil {
			return nil, fmt.Errorf("sandbox %q in %s was deleted after it stopped: %w", id, stateDir, sandbox.ErrNotFound)
		}
	}
	return infoFrom(dir, &m), nil
}

// expired reports whether a stopped sandbox should be deleted now.
func expired(dir string, m *meta) bool {
	if m.alive() {
		return false
	}
	if m.Options.Ephemeral {
		return true
	}
	if m.Options.AutoDeleteInterval <= 0 {
		return false
	}
	stopped := m.StoppedAt
	if x, ok := readExitRecord(dir); ok && x.StoppedAt.After(stopped) {
		stopped = x.StoppedAt
	}
	if stopped.IsZero() {
		// The init died without a record (e.g. the machine rebooted).
		if fi, err := os.Stat(filepath.Join(dir, metaFile)); err == nil {
			stopped = fi.ModTime()
		}
	}
	return time.Since(stopped) >= m.Options.AutoDeleteInterval
}

// readExitRecord reads the init's exit record. The folder holding it is
// writable from inside the sandbox, so only a small regular file is read.
func readExitRecord(dir string) (exitRecord, bool) {
	var x exitRecord
	fd, err := unix.Open(filepath.Join(dir, toolboxDir, exitFile), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return x, false
	}
	f := os.NewFile(uintptr(fd), exitFile)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return x, false
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil || json.Unmarshal(b, &x) != nil {
		return x, false
	}
	return x, true
}

// StopByID stops the sandbox id in stateDir: every process ends, the files
// stay. An ephemeral sandbox is removed.
func StopByID(ctx context.Context, stateDir, id string) error {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return err
	}
	var m meta
	if err := readJSON(filepath.Join(l.path, metaFile), &m); err != nil {
		l.unlock()
		if errors.Is(err, fs.ErrNotExist) {
			return notFound(stateDir, id)
		}
		return err
	}
	err = stopLocked(ctx, l.path, &m)
	l.unlock()
	if err != nil {
		return err
	}
	if m.Options.Ephemeral {
		return Remove(ctx, stateDir, id)
	}
	return nil
}

// stopLocked ends the init of the locked sandbox folder dir and every
// process of the sandbox, then records the stop in meta.
func stopLocked(ctx context.Context, dir string, m *meta) error {
	if err := killInit(ctx, dir, m); err != nil {
		return err
	}
	m.Status = sandbox.StatusStopped
	m.StoppedAt = time.Now().UTC()
	if err := writeJSON(filepath.Join(dir, metaFile), m); err != nil {
		return fmt.Errorf("sandbox %q: record stop: %w", m.ID, err)
	}
	return nil
}

// killInit asks the init recorded in m to shut down (SIGTERM), kills it
// after a grace period, then makes sure no process of the sandbox is left
// and removes its cgroups. It clears m.Init and m.Cgroups and records the
// last use in m.LastUsedAt (the next boot empties the folder holding the
// activity stamp); the caller writes m.
func killInit(ctx context.Context, dir string, m *meta) error {
	if m.alive() {
		r := m.Init
		pfd, err := unix.PidfdOpen(r.PID, 0)
		if err == nil {
			// The pid may have been reused between alive and PidfdOpen.
			if st, alive := procStartTime(r.PID); alive && st == r.StartTime {
				_ = unix.PidfdSendSignal(pfd, unix.SIGTERM, nil, 0)
				if !waitPidfd(ctx, pfd, 3*time.Second) {
					_ = unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
					waitPidfd(ctx, pfd, 5*time.Second)
				}
			}
			unix.Close(pfd)
		}
	}
	if err := m.Cgroups.destroy(ctx); err != nil {
		return err
	}
	m.Init, m.Cgroups = nil, nil
	m.LastUsedAt = lastUsed(dir, m)
	_ = os.Remove(filepath.Join(dir, socketFile))
	return nil
}

// waitPidfd waits until the process of pfd has exited.
func waitPidfd(ctx context.Context, pfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 || ctx.Err() != nil {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, min(ms, 100))
		if err == nil && n > 0 {
			return true
		}
	}
}

// Remove destroys the sandbox id in stateDir: its processes, cgroups,
// mounts and folder. It fails with an error matching sandbox.ErrNotFound
// when there is no such sandbox.
func Remove(ctx context.Context, stateDir, id string) error {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return err
	}
	defer l.unlock()
	return removeLocked(ctx, stateDir, l)
}

func removeLocked(ctx context.Context, stateDir string, l *lockedDir) error {
	var m meta
	if err := readJSON(filepath.Join(l.path, metaFile), &m); err == nil {
		if err := killInit(ctx, l.path, &m); err != nil {
			return err
		}
	}
	// Rename first so that no one finds a half-removed sandbox; the lock
	// holders that wait on the old folder notice and retry.
	trash := filepath.Join(stateDir, sandboxesDir, ".trash-"+filepath.Base(l.path)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(l.path, trash); err != nil {
		return fmt.Errorf("remove sandbox folder: %w", err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("remove sandbox folder: %w", err)
	}
	return nil
}

// removeAll is os.RemoveAll that also copes with folders the sandbox made
// unwritable (matters when not running as root).
func removeAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
