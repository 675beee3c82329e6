package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// stateDirError reports that the state dir cannot be written, telling the
// user how to choose another with agentbox's own flag and variable (an
// engine's message, written for library users, may name its Go options
// instead). It wraps the engine's error, which keeps deciding the exit code.
type stateDirError struct {
	dir   string
	cause string // what failed, e.g. "mkdir /x: read-only file system"
	err   error
}

func (e *stateDirError) Error() string {
	return fmt.Sprintf("state dir %s is not writable (%s); pass --state-dir DIR or set %s to a folder you can write",
		e.dir, e.cause, StateDirEnv)
}

func (e *stateDirError) Unwrap() error { return e.err }

// explainStateDir turns err into a [stateDirError] when it is a permission
// or read-only error and stateDir is indeed not writable; other errors are
// returned unchanged. Checking the folder, rather than matching the text of
// the engine's error, keeps an unrelated permission error (a namespace the
// kernel refuses, say) from being blamed on the state dir.
func explainStateDir(err error, stateDir string) error {
	if err == nil || stateDir == "" ||
		!(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
		return err
	}
	var sde *stateDirError
	if errors.As(err, &sde) {
		return err
	}
	path, werr := checkWritable(stateDir)
	if werr == nil {
		return err
	}
	cause := fmt.Sprintf("%s: %v", path, werr)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Error()
	}
	return &stateDirError{dir: stateDir, cause: cause, err: err}
}

// checkWritable reports whether dir can be used as a state dir: dir, or
// its nearest existing parent when it does not exist yet, must be writable
// and searchable. It returns the folder that is not, and why.
func checkWritable(dir string) (string, error) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return dir, err
	}
	for {
		err := unix.Access(p, unix.W_OK|unix.X_OK)
		if err == nil {
			return "", nil
		}
		if !errors.Is(err, unix.ENOENT) {
			return p, err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", nil
		}
		p = parent
	}
}
