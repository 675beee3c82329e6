package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/lockfile"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

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
			if err := os.MkdirAll(dir, 0o700); err != nil {
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
		if err := lockfile.Lock(ctx, f, unix.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
		// The folder may have been removed (and maybe re-created) while we
		// waited: retry unless the path still names what we locked.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(dir, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			if create && a.Mode&0o077 != 0 {
				// Made by a version that left it open to others.
				_ = unix.Fchmod(int(f.Fd()), 0o700)
			}
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

// lockStateFile opens the lock file name of stateDir (making it) and
// locks it, waiting for ctx at most; closing the file unlocks it.
func lockStateFile(ctx context.Context, stateDir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, name), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, stateDirError(stateDir, err)
	}
	if err := lockfile.Lock(ctx, f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
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
// empty, checked by CheckStateDir) after checking id.
func resolveID(stateDir, id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return stateDir, err
	}
	return useStateDir(stateDir)
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

// List describes every sandbox in stateDir with its live status. Stopped
// sandboxes past their AutoDeleteInterval and stopped ephemeral sandboxes
// are removed first.
func List(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	return listWith(ctx, stateDir, lookup)
}

// listWith is List, describing each sandbox with describe.
func listWith(ctx context.Context, stateDir string, describe func(ctx context.Context, stateDir, id string) (*sandbox.Info, error)) ([]sandbox.Info, error) {
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
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
		if strings.HasPrefix(e.Name(), trashPrefix) {
			// Left by a removal that was interrupted.
			p := filepath.Join(stateDir, sandboxesDir, e.Name())
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute || abandoned(p) {
				_ = removeAll(p)
			}
			continue
		}
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		info, err := describe(ctx, stateDir, e.Name())
		if err != nil {
			continue
		}
		out = append(out, *info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Open returns a handle of the existing sandbox id in stateDir ("" is
// DefaultStateDir). It is cheap: it reads the sandbox's metadata and
// starts nothing, and the handle has the sandbox's own Config and, as its
// status, the sandbox's (running or stopped). Every operation on one
// sandbox is a method of the handle: Info, Stop, Destroy, Start, commands,
// UpdateNetworkSettings, UpdateResources, PublishPort, UnpublishPort,
// DialToolbox, DialPort, CreateSnapshot. A handle from Open holds no
// connection until it runs a command; Close it when it did.
//
// It fails with an error matching sandbox.ErrNotFound when there is no
// such sandbox, or when it was stopped past its AutoDeleteInterval (or
// ephemeral), which Open removes as [List] does; with one matching
// sandbox.ErrInvalidArgument for a malformed id. Use [New] to create a
// sandbox, or to connect to one whether or not it exists.
func Open(ctx context.Context, stateDir, id string) (*Sandbox, error) {
	stateDir, m, err := openMeta(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	o, err := Options{ID: id, StateDir: stateDir}.normalize()
	if err != nil {
		return nil, err
	}
	s, err := newSandbox(o, nil)
	if err != nil {
		return nil, err
	}
	s.adopt(&m)
	// A sandbox whose init is recorded counts as running, also when the
	// init died: Stop then clears what it left (cgroups, network).
	if m.Init != nil {
		s.SetStatus(sandbox.StatusRunning)
	} else {
		s.SetStatus(sandbox.StatusStopped)
	}
	return s, nil
}

// openMeta resolves stateDir and reads the metadata of the existing
// sandbox id. It fails with an error matching sandbox.ErrNotFound when
// there is none, and removes the sandbox when it expired (see expired).
func openMeta(ctx context.Context, stateDir, id string) (string, meta, error) {
	stateDir, err := resolveID(stateDir, id)
	if err != nil {
		return stateDir, meta{}, err
	}
	dir := sandboxDir(stateDir, id)
	m, err := readMeta(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A create that a crash interrupted is rolled back.
			rollbackOrphan(ctx, stateDir, id)
			return stateDir, m, notFound(stateDir, id)
		}
		return stateDir, m, fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	if err := stopIdlePaused(ctx, stateDir, id, dir, &m); err != nil {
		return stateDir, m, err
	}
	if expired(dir, &m) {
		if err := remove(ctx, stateDir, id); err == nil {
			return stateDir, m, fmt.Errorf("sandbox %q in %s was deleted after it stopped: %w", id, stateDir, sandbox.ErrNotFound)
		}
	}
	return stateDir, m, nil
}

// lookup describes the sandbox id in stateDir from its metadata (see
// openMeta).
func lookup(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	stateDir, m, err := openMeta(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return infoFrom(sandboxDir(stateDir, id), &m), nil
}

// stopByID stops the sandbox id in stateDir: every process ends, the files
// stay. An ephemeral sandbox is removed. [Sandbox.Stop] runs it.
func stopByID(ctx context.Context, stateDir, id string) error {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return err
	}
	m, err := readMeta(l.path)
	if err != nil {
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
	if m.Config.Ephemeral {
		return remove(ctx, stateDir, id)
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
	if err := writeMeta(dir, m); err != nil {
		return fmt.Errorf("sandbox %q: record stop: %w", m.ID, err)
	}
	return nil
}

// killInit asks the init recorded in m to shut down (SIGTERM), kills it
// after a grace period, then makes sure no process of the sandbox is left,
// removes its cgroups and its network's host side (its egress proxy too),
// and waits until its disk image is released. It clears m.Init,
// m.Cgroups, m.Network and m.EgressFDs and
// records the last use in m.LastUsedAt (the next boot empties the folder
// holding the activity stamp); the caller writes m. It ends first what an
// interrupted start left unrecorded (reclaimStrays).
func killInit(ctx context.Context, dir string, m *meta) error {
	thawForStop(ctx, dir, m)
	reclaimStrays(ctx, filepath.Dir(filepath.Dir(dir)), dir, m)
	if m.alive() {
		terminate(ctx, *m.Init)
	}
	crashPoint("init ended")
	stopMounts(ctx, dir, m)
	stopEgressProxy(ctx, filepath.Dir(filepath.Dir(dir)), m)
	stopUserNet(ctx, m)
	teardownNetwork(ctx, m)
	if err := m.Cgroups.Destroy(ctx); err != nil {
		return err
	}
	if m.Limits != nil && m.Limits.DiskMB > 0 {
		// Its file system goes with its mount namespace: wait for that,
		// so that the next start does not mount the image twice.
		if err := waitDiskReleased(ctx, dir); err != nil {
			return err
		}
	}
	m.Init, m.Cgroups, m.ProxyEnv, m.EgressFDs = nil, nil, false, nil
	m.LastUsedAt = lastUsed(dir, m)
	_ = os.Remove(filepath.Join(dir, socketFile))
	return nil
}

// remove destroys the sandbox id in stateDir: its processes, cgroups,
// mounts and folder. It fails with an error matching sandbox.ErrNotFound
// when there is no such sandbox. [Sandbox.Destroy] runs it.
func remove(ctx context.Context, stateDir, id string) error {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return err
	}
	defer l.unlock()
	return removeLocked(ctx, stateDir, l)
}

// removeLocked removes the locked sandbox folder l of stateDir, with or
// without metadata: without, what an interrupted create left (an init,
// cgroups) is found by the folder's pending init and the cgroups' names.
func removeLocked(ctx context.Context, stateDir string, l *lockedDir) error {
	m, merr := readMeta(l.path)
	if merr != nil {
		m = meta{ID: filepath.Base(l.path)}
	}
	if err := killInit(ctx, l.path, &m); err != nil {
		return err
	}
	// Rename first so that no one finds a half-removed sandbox; the lock
	// holders that wait on the old folder notice and retry.
	trash := filepath.Join(stateDir, sandboxesDir, trashPrefix+filepath.Base(l.path)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(l.path, trash); err != nil {
		return fmt.Errorf("remove sandbox folder: %w", err)
	}
	crashPoint("folder renamed")
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("remove sandbox folder: %w", err)
	}
	// A range not returned now (the pool is locked past ctx, or not
	// writable) is reclaimed by the next allocation: its folder is gone.
	_ = releaseHostIDs(ctx, stateDir, filepath.Base(l.path))
	if merr != nil {
		return releaseUnknownRoot(stateDir, filepath.Base(l.path))
	}
	if err := releaseRoot(stateDir, filepath.Base(l.path), m.Root); err != nil {
		return fmt.Errorf("sandbox removed; releasing its image failed: %w", err)
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
