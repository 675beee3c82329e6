package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The state dir holds every sandbox's toolbox socket and files: whoever
// can write into it, or into its sandboxes folder, can swap a socket and
// see or change what the sandboxes run. So it must be private to its
// user, as ssh's StrictModes requires of ~/.ssh.

// StateDirEnv is the environment variable that names the state dir when
// Options.StateDir is empty.
const StateDirEnv = "AGENTBOX_STATE_DIR"

// ErrUnsafeStateDir reports a state dir (or its sandboxes folder) that
// another user could change: owned by someone other than this user or
// root, or writable by group or others.
var ErrUnsafeStateDir = errors.New("unsafe state dir")

// ErrNoStateDir reports that no per-user place for the state dir was
// found: none of $AGENTBOX_STATE_DIR, $XDG_STATE_HOME, $HOME and
// $XDG_RUNTIME_DIR is set (to an absolute path).
var ErrNoStateDir = errors.New("no state dir")

// DefaultStateDir returns the state dir used when Options.StateDir is
// empty, the first of:
//
//   - $AGENTBOX_STATE_DIR;
//   - $XDG_STATE_HOME/agentbox;
//   - $HOME/.local/state/agentbox;
//   - $XDG_RUNTIME_DIR/agentbox (per user, but usually emptied when the
//     user's last session ends: sandboxes do not outlive it).
//
// The XDG variables count only when they hold absolute paths, as the XDG
// base directory specification says. With none of them set it fails with
// an error matching [ErrNoStateDir] rather than fall back to a folder
// other users share, such as /tmp.
func DefaultStateDir() (string, error) {
	if d := os.Getenv(StateDirEnv); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox"), nil
	}
	if home := os.Getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "agentbox"), nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox"), nil
	}
	return "", fmt.Errorf("%w: HOME, XDG_STATE_HOME and XDG_RUNTIME_DIR are not set, and agentbox never falls back to a folder other users share; set %s to a folder of your own", ErrNoStateDir, StateDirEnv)
}

// CheckStateDir reports whether dir is safe to use as a state dir: it
// fails with an error matching [ErrUnsafeStateDir] when dir or its
// sandboxes folder is owned by another user than this process's (root
// excepted), or is writable by group or others, or when the sandboxes
// folder is a symbolic link. dir itself may be a symbolic link owned by
// this user or root; its target is checked then. A folder that does not
// exist yet passes: the engine creates it private (0700).
//
// Every function of the package that uses a state dir checks it first.
func CheckStateDir(dir string) error {
	target, err := checkOwned(dir, dir, true)
	if err != nil || target == "" {
		return err
	}
	_, err = checkOwned(dir, filepath.Join(target, sandboxesDir), false)
	return err
}

// checkOwned checks path, a part of the state dir stateDir, without
// following a symbolic link at path (unless followLink: then the link must
// be ours and its target is checked too). It returns the path to go on
// from, or "" when path does not exist.
func checkOwned(stateDir, path string, followLink bool) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", nil
		}
		return "", stateDirError(stateDir, &fs.PathError{Op: "lstat", Path: path, Err: err})
	}
	if err := ownedByUs(stateDir, path, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if !followLink {
			return "", unsafeStateDir(stateDir, "%s is a symbolic link; it must be a folder", path)
		}
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", nil
			}
			return "", stateDirError(stateDir, err)
		}
		return checkOwned(stateDir, target, false)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", stateDirError(stateDir, fmt.Errorf("%s is not a folder", path))
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return "", unsafeStateDir(stateDir, "%s is writable by group or others (mode %04o), so another user could replace a sandbox's socket or files: run chmod go-w %s, or choose another state dir", path, perm, path)
	}
	return path, nil
}

// ownedByUs fails unless st, the status of path, belongs to this process's
// user or to root.
func ownedByUs(stateDir, path string, st *unix.Stat_t) error {
	uid := os.Geteuid()
	if int(st.Uid) == uid || st.Uid == 0 {
		return nil
	}
	return unsafeStateDir(stateDir, "%s is owned by uid %d, not by you (uid %d), so that user could replace a sandbox's socket or files: choose a state dir of your own", path, st.Uid, uid)
}

func unsafeStateDir(stateDir, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrUnsafeStateDir, stateDir, fmt.Sprintf(format, args...))
}

// useStateDir returns the state dir to use for stateDir (DefaultStateDir
// when empty) once it passed CheckStateDir.
func useStateDir(stateDir string) (string, error) {
	if stateDir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return "", err
		}
		stateDir = d
	}
	return stateDir, CheckStateDir(stateDir)
}
