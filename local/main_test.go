//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestMain(m *testing.M) {
	local.Init()
	if code, ok := helperMain(); ok {
		os.Exit(code)
	}
	if code, ok := probeMain(); ok {
		os.Exit(code)
	}
	if code, ok := crashChildMain(); ok {
		os.Exit(code)
	}
	// Inits orphaned by helper processes the tests kill come to us, so that
	// the tests can reap them instead of leaving zombies on the host.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	goleak.VerifyTestMain(m)
}

// newStateDir returns a fresh state dir whose sandboxes are all removed
// when the test ends.
func newStateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	removeSandboxesAtEnd(t, dir)
	return dir
}

// newSharedStateDir is newStateDir in a folder that other users may
// traverse (t.TempDir's parent is closed to them).
func newSharedStateDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	removeSandboxesAtEnd(t, dir)
	return dir
}

// removeSandboxesAtEnd removes, when the test ends, every sandbox still in
// stateDir (processes, cgroups, folder), and reaps their inits when they
// became ours, so that a test that fails halfway leaves nothing behind.
func removeSandboxesAtEnd(t testing.TB, stateDir string) {
	t.Cleanup(func() {
		ents, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
		for _, e := range ents {
			id := e.Name()
			if local.ValidateID(id) != nil {
				continue // a removal's leftover, deleted with the folder
			}
			pid := local.InitPIDOf(stateDir, id)
			if err := localtest.Destroy(context.Background(), stateDir, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("remove sandbox %s left by the test: %v", id, err)
			}
			if pid != 0 {
				reapZombie(pid)
			}
		}
	})
}

// openSandbox returns a sandbox made by local.New (in a fresh state dir
// unless opts has one), not started yet and destroyed when the test ends.
func openSandbox(t testing.TB, opts local.Options) *local.Sandbox {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = newStateDir(t)
	}
	sb, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return sb
}

// newSandbox is openSandbox, started.
func newSandbox(t testing.TB, opts local.Options) *local.Sandbox {
	t.Helper()
	sb := openSandbox(t, opts)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// poll calls cond every few milliseconds until it returns true, for
// timeout at most, and reports whether it did: tests wait for a condition
// rather than sleep.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// waitAutoStop waits until the init of sb has stopped itself, failing the
// test after 5s.
func waitAutoStop(t testing.TB, sb *local.Sandbox) {
	t.Helper()
	if !poll(5*time.Second, func() bool { return local.InitPID(sb) == 0 }) {
		t.Fatalf("init %d still runs after the idle interval", local.InitPID(sb))
	}
}

// run runs command in sb and fails the test on an error (not on a non-zero
// exit code).
func run(t testing.TB, sb sandbox.Sandbox, command string) *sandbox.CommandResult {
	t.Helper()
	r, err := sb.ExecuteCommand(context.Background(), command, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return r
}

// mustRun is run that also requires exit code 0 and returns stdout.
func mustRun(t testing.TB, sb sandbox.Sandbox, command string) string {
	t.Helper()
	r := run(t, sb, command)
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", command, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// pidNS returns the pid namespace link of pid, e.g. "pid:[4026532…]".
func pidNS(pid int) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return s
}

// procsInNS lists the live (non-zombie) host processes in namespace ns,
// with their command lines.
func procsInNS(ns string) map[int]string {
	out := map[int]string{}
	names, _ := filepath.Glob("/proc/[0-9]*")
	for _, n := range names {
		pid, _ := strconv.Atoi(filepath.Base(n))
		if l, _ := os.Readlink(n + "/ns/pid"); l != ns || ns == "" {
			continue
		}
		stat, err := os.ReadFile(n + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		cmd, _ := os.ReadFile(n + "/cmdline")
		out[pid] = strings.ReplaceAll(string(cmd), "\x00", " ")
	}
	return out
}

// reapZombie reaps pid if it became our child (as subreaper) and exited.
func reapZombie(pid int) {
	poll(5*time.Second, func() bool {
		var ws syscall.WaitStatus
		n, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		return n == pid || errors.Is(err, syscall.ECHILD)
	})
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
