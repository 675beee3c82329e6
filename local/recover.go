package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/lockfile"
)

// Recovery from a process that died in the middle of a change to a
// sandbox (a crash, a kill -9 of the program owning it): every change
// holds the sandbox folder's lock, so a folder whose lock is free is at
// rest, and what the change left is read from the folder as it is.
//
//   - A folder without metadata, unlocked: a create that never finished.
//     Open, List and New roll it back (rollbackOrphan), and Remove removes
//     it, whatever it holds.
//   - An init that runs but is not recorded in the metadata (a start
//     interrupted between the fork and the write of meta.json): boot
//     notes every init it forks in pendingInitFile first, and killInit
//     ends such an init, with the cgroups that carry the sandbox's name
//     (reclaimStrays), before anything else.
//   - A removal interrupted after the rename of the folder: List removes
//     the trash folder it left.

// pendingInitFile, in a sandbox folder, records the last init a start
// forked, before the start records it in meta.json: a start interrupted
// in between leaves an init that only this file names.
const pendingInitFile = "init-pending.json"

// Remove destroys the sandbox id of stateDir ("" is DefaultStateDir)
// whatever state its folder is in: with or without metadata (a create or
// a removal that a crash interrupted), running or not. It ends every
// process of the sandbox, the init a crashed start left unrecorded among
// them, and removes its cgroups, its network link and firewall, its host
// id range and its folder. It waits for a change in progress to end
// first. It fails with an error matching sandbox.ErrNotFound when there
// is no such folder, and with one matching sandbox.ErrInvalidArgument
// for a malformed id.
func Remove(ctx context.Context, stateDir, id string) error {
	return remove(ctx, stateDir, id)
}

// notePendingInit records pid, the init just forked for the sandbox
// folder dir, in pendingInitFile (best effort: the cgroups name the init
// too, where there are cgroups).
func notePendingInit(dir string, pid int) {
	st, ok := procStartTime(pid)
	if !ok {
		return
	}
	_ = writeJSON(filepath.Join(dir, pendingInitFile), initRecord{PID: pid, StartTime: st})
}

// pendingInit returns the init recorded in pendingInitFile of the sandbox
// folder dir when it still runs.
func pendingInit(dir string) (initRecord, bool) {
	var r initRecord
	if err := readJSON(filepath.Join(dir, pendingInitFile), &r); err != nil || r.PID <= 0 {
		return r, false
	}
	st, ok := procStartTime(r.PID)
	return r, ok && st == r.StartTime
}

// rollbackOrphan removes the folder of the sandbox id of stateDir when it
// has no metadata and no process holds its lock: a create interrupted
// before it wrote the metadata. It reports whether it removed it.
func rollbackOrphan(ctx context.Context, stateDir, id string) bool {
	dir := sandboxDir(stateDir, id)
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	ok, err := lockfile.TryLock(f, unix.LOCK_EX)
	if err != nil || !ok {
		f.Close()
		return false
	}
	l := &lockedDir{path: dir, f: f}
	defer l.unlock()
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(dir, &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
		return false // removed (and maybe made again) meanwhile
	}
	if _, err := os.Lstat(filepath.Join(dir, metaFile)); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return removeLocked(ctx, stateDir, l) == nil
}

// releaseUnknownRoot releases, in the image store of stateDir, what the
// removed sandbox id held, when its metadata (which says what it held)
// was missing: a create interrupted after it resolved its image.
func releaseUnknownRoot(stateDir, id string) error {
	if _, err := os.Stat(filepath.Join(stateDir, imagesDir)); err != nil {
		return nil
	}
	st, err := openImages(stateDir)
	if err != nil {
		return err
	}
	return st.Release(id)
}

// leftovers reports whether the sandbox folder dir, which has no
// metadata, holds anything: a new folder is empty, so what it holds was
// left by a create that a crash interrupted.
func leftovers(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}

// crashPoint is called at the steps of a change where a crash leaves the
// most to recover ("init configured", "init ended", "folder renamed"): tests
// set it to kill the process there. It does nothing otherwise.
var crashPoint = func(step string) {}

// abandoned reports whether no process holds the lock of the folder dir
// (a sandbox folder being removed keeps the lock its remover took): the
// removal that renamed it ended before it removed it.
func abandoned(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close() // unlocks
	ok, err := lockfile.TryLock(f, unix.LOCK_EX)
	return err == nil && ok
}
