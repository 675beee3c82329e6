//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Crash children: the test binary re-executed with crashEnv set owns a
// sandbox of the state dir and kills itself (SIGKILL) at one step of a
// change (local.SetCrashPoint), as a crash or kill -9 of the program
// owning the sandbox would.
const crashEnv = "AGENTBOX_LOCAL_TEST_CRASH"

// crashChildMain runs a crash child and reports its exit code, or
// returns false when this process is not one. CRASH_OP is create, start,
// stop or destroy; CRASH_AT the step to die at.
func crashChildMain() (int, bool) {
	op := os.Getenv(crashEnv)
	if op == "" {
		return 0, false
	}
	at := os.Getenv("CRASH_AT")
	local.SetCrashPoint(func(step string) {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	})
	ctx := context.Background()
	dir, id := os.Getenv("CRASH_STATE_DIR"), os.Getenv("CRASH_ID")
	var err error
	switch op {
	case "create":
		var sb *local.Sandbox
		if sb, err = local.New(local.Options{ID: id, StateDir: dir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}}); err == nil {
			_, err = sb.Start(ctx)
		}
	case "start", "stop", "destroy":
		var sb *local.Sandbox
		if sb, err = local.Open(ctx, dir, id); err == nil {
			switch op {
			case "start":
				_, err = sb.Start(ctx)
			case "stop":
				err = sb.Stop(ctx)
			default:
				err = sb.Destroy(ctx)
			}
		}
	}
	fmt.Printf("%s ended without reaching %q: %v\n", op, at, err)
	return 1, true
}

// crashAt runs op on sandbox id of stateDir in a crash child that dies at
// step; the test fails unless it died there.
func crashAt(t *testing.T, stateDir, id, op, step string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), crashEnv+"="+op, "CRASH_AT="+step, "CRASH_STATE_DIR="+stateDir, "CRASH_ID="+id)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s of %s did not die at %q: %v: %s", op, id, step, err, out)
	}
}

// crashedCreate returns a state dir holding sandbox id whose create died
// once its init was configured, before the metadata was written, and the
// pid of that init, which runs on.
func crashedCreate(t *testing.T, id string) (string, int) {
	t.Helper()
	dir := newStateDir(t)
	crashAt(t, dir, id, "create", "init configured")
	pid := local.PendingInitPID(dir, id)
	if pid == 0 {
		t.Fatal("the init the crashed create forked does not run")
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes", id, "meta.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the crashed create wrote its metadata (%v): the crash point is too late", err)
	}
	return dir, pid
}

// checkGone fails t unless nothing of sandbox id of stateDir is left: its
// folder, the init pid (reaped when it is ours), its cgroups.
func checkGone(t *testing.T, stateDir, id string, pid int) {
	t.Helper()
	if pid != 0 {
		reapZombie(pid)
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("the init (pid %d) still runs", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "sandboxes", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox folder is left (%v)", err)
	}
	if local.CgroupsLeft(stateDir, id) {
		t.Error("the sandbox's cgroups are left")
	}
}

func TestCrashedCreateIsRolledBackByList(t *testing.T) {
	dir, pid := crashedCreate(t, "crash-list")
	infos, err := local.List(context.Background(), dir)
	if err != nil || len(infos) != 0 {
		t.Fatalf("List after a crashed create: %+v, %v; want none", infos, err)
	}
	checkGone(t, dir, "crash-list", pid)
}

func TestCrashedCreateIsRolledBackByOpen(t *testing.T) {
	dir, pid := crashedCreate(t, "crash-open")
	if _, err := local.Open(context.Background(), dir, "crash-open"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Open after a crashed create: %v, want ErrNotFound", err)
	}
	checkGone(t, dir, "crash-open", pid)
}

func TestRemoveWithoutMetadata(t *testing.T) {
	dir, pid := crashedCreate(t, "crash-remove")
	if err := local.Remove(context.Background(), dir, "crash-remove"); err != nil {
		t.Fatalf("Remove of a folder without metadata: %v", err)
	}
	checkGone(t, dir, "crash-remove", pid)
	if err := local.Remove(context.Background(), dir, "crash-remove"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Remove again: %v, want ErrNotFound", err)
	}
}

func TestCreateAfterCrashedCreate(t *testing.T) {
	dir, pid := crashedCreate(t, "crash-again")
	sb, err := local.New(local.Options{ID: "crash-again", StateDir: dir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		t.Fatal(err)
	}
	if outcome, err := sb.Start(context.Background()); err != nil || outcome != sandbox.OutcomeCreated {
		t.Fatalf("create after a crashed create: %v, %v; want created", outcome, err)
	}
	reapZombie(pid)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("the crashed create's init (pid %d) still runs", pid)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// stoppedWithFile returns a state dir holding the stopped sandbox id with
// the file ~/kept.
func stoppedWithFile(t *testing.T, id string) string {
	t.Helper()
	dir := newStateDir(t)
	sb, err := local.New(local.Options{ID: id, StateDir: dir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sb.ExecuteCommand(context.Background(), "echo kept > ~/kept", nil, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("write a file: %v %+v", err, r)
	}
	pid := local.InitPID(sb)
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	reapZombie(pid)
	return dir
}

// checkRestarts fails t unless sandbox id of stateDir starts from a new
// handle with its file, its running init being the only one.
func checkRestarts(t *testing.T, stateDir, id string, stray int) {
	t.Helper()
	ctx := context.Background()
	sb, err := local.Open(ctx, stateDir, id)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	if _, err := sb.Start(ctx); err != nil {
		t.Fatalf("start after the crash: %v", err)
	}
	if r, err := sb.ExecuteCommand(ctx, "cat ~/kept", nil, nil); err != nil || strings.TrimSpace(r.Stdout) != "kept" {
		t.Fatalf("the file after the crash: %v %+v", err, r)
	}
	if stray != 0 {
		reapZombie(stray)
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", stray)); err == nil {
			t.Errorf("the init the crash left (pid %d) still runs beside the new one", stray)
		}
	}
	pid := local.InitPID(sb)
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	checkGone(t, stateDir, id, pid)
}

func TestCrashedStartIsReclaimedByStart(t *testing.T) {
	dir := stoppedWithFile(t, "crash-start")
	crashAt(t, dir, "crash-start", "start", "init configured")
	stray := local.PendingInitPID(dir, "crash-start")
	if stray == 0 {
		t.Fatal("the init the crashed start forked does not run")
	}
	info, err := lookupInfo(dir, "crash-start")
	if err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("after a crashed start: %+v %v, want stopped", info, err)
	}
	checkRestarts(t, dir, "crash-start", stray)
}

func TestCrashedStopIsCompletedByStart(t *testing.T) {
	dir := stoppedWithFile(t, "crash-stop")
	sb, err := local.Open(context.Background(), dir, "crash-stop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := local.InitPID(sb)
	sb.Close(context.Background())
	crashAt(t, dir, "crash-stop", "stop", "init ended")
	reapZombie(pid)
	info, err := lookupInfo(dir, "crash-stop")
	if err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("after a crashed stop: %+v %v, want stopped", info, err)
	}
	checkRestarts(t, dir, "crash-stop", 0)
}

func TestCrashedDestroyIsCompletedByRemove(t *testing.T) {
	dir := stoppedWithFile(t, "crash-destroy")
	crashAt(t, dir, "crash-destroy", "destroy", "init ended")
	if err := local.Remove(context.Background(), dir, "crash-destroy"); err != nil {
		t.Fatalf("Remove after a crashed destroy: %v", err)
	}
	checkGone(t, dir, "crash-destroy", 0)
}

func TestCrashedDestroyAfterRenameIsGone(t *testing.T) {
	dir := stoppedWithFile(t, "crash-renamed")
	crashAt(t, dir, "crash-renamed", "destroy", "folder renamed")
	if infos, err := local.List(context.Background(), dir); err != nil || len(infos) != 0 {
		t.Fatalf("List after a destroy crashed past its rename: %+v %v", infos, err)
	}
	if err := local.Remove(context.Background(), dir, "crash-renamed"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Remove: %v, want ErrNotFound", err)
	}
	checkGone(t, dir, "crash-renamed", 0)
	if ents, _ := os.ReadDir(filepath.Join(dir, "sandboxes")); len(ents) != 0 {
		t.Errorf("List left the folder of the interrupted removal: %v", ents)
	}
}

// lookupInfo describes sandbox id of stateDir from a new handle.
func lookupInfo(stateDir, id string) (*sandbox.Info, error) {
	sb, err := local.Open(context.Background(), stateDir, id)
	if err != nil {
		return nil, err
	}
	return sb.Info(context.Background())
}
