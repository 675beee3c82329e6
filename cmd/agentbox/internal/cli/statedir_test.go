package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/rodir"
)

// engineStateDirError is an error as the local engine reports an
// unwritable state dir, with its hint meant for library users.
func engineStateDirError(stateDir string) error {
	errno := syscall.EACCES
	if os.Geteuid() == 0 {
		errno = syscall.EROFS
	}
	err := &fs.PathError{Op: "mkdir", Path: filepath.Join(stateDir, "sandboxes"), Err: errno}
	return fmt.Errorf("state dir %s is not writable (%w); set Options.StateDir or AGENTBOX_STATE_DIR to a folder you can write", stateDir, err)
}

func TestUnwritableStateDirHint(t *testing.T) {
	stateDir := filepath.Join(rodir.New(t), "state")
	check := func(r result, wantCode int) {
		t.Helper()
		if r.code != wantCode {
			t.Errorf("exit %d, want %d: %v", r.code, wantCode, r)
		}
		for _, want := range []string{"state dir " + stateDir + " is not writable", "mkdir " + stateDir, "pass --state-dir DIR or set AGENTBOX_STATE_DIR"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q: %v", want, r)
			}
		}
		if strings.Contains(r.stderr, "Options.StateDir") {
			t.Errorf("stderr names the Go option: %v", r)
		}
	}

	h := newHarness(t)
	h.e.openErr = engineStateDirError(stateDir)
	check(h.run("--state-dir", stateDir, "exec", "true"), ExitExecFailed)
	check(h.run("--state-dir", stateDir, "spawn", "true"), ExitError)
	h.env[StateDirEnv] = stateDir
	h.e.listErr = engineStateDirError(stateDir)
	check(h.run("sandbox", "ls"), ExitError)
}

func TestPermissionErrorNotBlamedOnStateDir(t *testing.T) {
	// The state dir is writable: a permission error is about something
	// else and is shown as the engine reported it.
	h := newHarness(t)
	h.e.openErr = fmt.Errorf("create the user namespace: %w", os.NewSyscallError("unshare", syscall.EPERM))
	r := h.run("exec", "true")
	if r.code != ExitExecFailed || !strings.Contains(r.stderr, "unshare: operation not permitted") ||
		strings.Contains(r.stderr, "state dir") || strings.Contains(r.stderr, "--state-dir") {
		t.Errorf("got %v, want the engine's error unchanged", r)
	}
}

func TestCheckWritable(t *testing.T) {
	ro := rodir.New(t)
	for _, dir := range []string{ro, filepath.Join(ro, "a", "b")} {
		if p, err := checkWritable(dir); p != ro || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
			t.Errorf("checkWritable(%s) = %q, %v; want %s and a permission or read-only error", dir, p, err, ro)
		}
	}
	rw := t.TempDir()
	for _, dir := range []string{rw, filepath.Join(rw, "a", "b")} {
		if p, err := checkWritable(dir); p != "" || err != nil {
			t.Errorf("checkWritable(%s) = %q, %v; want success", dir, p, err)
		}
	}
}
