//go:build linux

package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// pausedSandbox returns a started sandbox of opts, paused; it needs root
// (cgroups).
func pausedSandbox(t *testing.T, opts local.Options) *local.Sandbox {
	t.Helper()
	testenv.NeedRoot(t, "pausing needs the cgroup freezer, and cgroups need root")
	sb := newSandbox(t, opts)
	if err := sb.Pause(context.Background()); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	return sb
}

// cpuUsage reads the CPU the sandbox's cgroup used (v1 cpuacct.usage in
// ns, v2 usage_usec of cpu.stat).
func cpuUsage(t *testing.T, sb *local.Sandbox) int64 {
	t.Helper()
	if cgroupV1(sb) {
		n, err := strconv.ParseInt(strings.TrimSpace(cgroupFile(t, sb, "cpuacct", false, "cpuacct.usage")), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return keyedValue(t, cgroupFile(t, sb, "unified", false, "cpu.stat"), "usage_usec")
}

// TestPauseUsesNoCPU: a paused sandbox's busy loop uses no CPU (its
// cgroup's usage counter does not move across a sleep); resumed, the
// counter moves again.
func TestPauseUsesNoCPU(t *testing.T) {
	testenv.NeedRoot(t, "pausing needs the cgroup freezer, and cgroups need root")
	sb := newSandbox(t, local.Options{})
	ctx := context.Background()
	if _, err := sb.Processes().Spawn(ctx, "while :; do :; done", nil); err != nil {
		t.Fatal(err)
	}
	start := cpuUsage(t, sb)
	if !poll(10*time.Second, func() bool { return cpuUsage(t, sb) > start }) {
		t.Fatal("the busy loop uses no CPU before the pause")
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	before := cpuUsage(t, sb)
	time.Sleep(200 * time.Millisecond)
	if after := cpuUsage(t, sb); after != before {
		t.Fatalf("CPU usage of a paused sandbox moved: %d → %d", before, after)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { return cpuUsage(t, sb) > before }) {
		t.Fatal("CPU usage does not move after Resume")
	}
}

// TestPauseSeenByOtherProcesses: List and a handle from Open (as another
// process would get them) report a paused sandbox "paused", with its
// auto-stop deadline.
func TestPauseSeenByOtherProcesses(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	ctx := context.Background()
	list, err := local.List(ctx, sb.StateDir())
	if err != nil || len(list) != 1 || list[0].Status != sandbox.StatusPaused {
		t.Fatalf("List = %+v, %v; want one paused sandbox", list, err)
	}
	if list[0].TimeoutAt.IsZero() {
		t.Error("a paused sandbox's TimeoutAt is not set: its auto-stop still applies")
	}
	h, err := local.Open(ctx, sb.StateDir(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	info, err := h.Info(ctx)
	if err != nil || info.Status != sandbox.StatusPaused {
		t.Fatalf("Info through Open = %+v, %v; want paused", info, err)
	}
}

// TestResumeThroughAnotherHandle: a command through another handle
// resumes the sandbox, and the handle that paused it sees it running.
func TestResumeThroughAnotherHandle(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	ctx := context.Background()
	h, err := local.Open(ctx, sb.StateDir(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if r, err := h.ExecuteCommand(ctx, "echo hi", nil, nil); err != nil || r.Stdout != "hi\n" {
		t.Fatalf("command through another handle: %+v, %v", r, err)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusRunning {
		t.Fatalf("Info of the pausing handle = %+v, %v; want running", info, err)
	}
}

// TestStartResumes: Start of a paused sandbox resumes it.
func TestStartResumes(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	ctx := context.Background()
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusRunning {
		t.Fatalf("Info after Start = %+v, %v; want running", info, err)
	}
	if local.Frozen(sb) {
		t.Fatal("the sandbox's cgroup is still frozen after Start")
	}
}

// TestDialToolboxResumes: DialToolbox (serve's toolbox proxy) resumes a
// paused sandbox.
func TestDialToolboxResumes(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	c, err := sb.DialToolbox(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if local.Frozen(sb) {
		t.Fatal("the sandbox's cgroup is still frozen after DialToolbox")
	}
}

// TestStopPaused: Stop of a paused sandbox ends every process and
// leaves no cgroup; the next Start boots it afresh.
func TestStopPaused(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	ctx := context.Background()
	pid, dirs := local.InitPID(sb), local.CgroupDirs(sb)
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop of a paused sandbox: %v", err)
	}
	assertGone(t, pid, dirs)
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Info after Stop = %+v, %v; want stopped", info, err)
	}
	if r, err := sb.ExecuteCommand(ctx, "echo again", nil, nil); err != nil || r.Stdout != "again\n" {
		t.Fatalf("command after Stop of a paused sandbox: %+v, %v", r, err)
	}
}

// TestDestroyPaused: Destroy of a paused sandbox leaves no process,
// cgroup or folder.
func TestDestroyPaused(t *testing.T) {
	sb := pausedSandbox(t, local.Options{})
	pid, dirs, dir := local.InitPID(sb), local.CgroupDirs(sb), local.Dir(sb)
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatalf("Destroy of a paused sandbox: %v", err)
	}
	assertGone(t, pid, dirs)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox folder %s left: %v", dir, err)
	}
}

// assertGone checks that the process pid has ended and the cgroup
// folders dirs are removed.
func assertGone(t *testing.T, pid int, dirs []string) {
	t.Helper()
	if pid == 0 || len(dirs) == 0 {
		t.Fatalf("no init (%d) or cgroups (%v) recorded before", pid, dirs)
	}
	if !poll(5*time.Second, func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(pid)); return err != nil }) {
		t.Errorf("init %d still runs", pid)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cgroup %s left", d)
		}
	}
}

// TestPausedIdleIsStopped: a paused sandbox idle past its
// AutoStopInterval is stopped by the host (its init's timer is frozen):
// List finds it stopped, with no process left. The idle time is made by
// dating its last use (the activity stamp) two hours back.
func TestPausedIdleIsStopped(t *testing.T) {
	sb := pausedSandbox(t, local.Options{Config: local.Config{AutoStopInterval: time.Hour}})
	pid := local.InitPID(sb)
	ctx := context.Background()
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(local.Dir(sb), "toolbox", "last-used"), long, long); err != nil {
		t.Fatal(err)
	}
	list, err := local.List(ctx, sb.StateDir())
	if err != nil || len(list) != 1 || list[0].Status != sandbox.StatusStopped {
		t.Fatalf("List = %+v, %v; want the idle paused sandbox stopped", list, err)
	}
	if !poll(5*time.Second, func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(pid)); return err != nil }) {
		t.Errorf("init %d still runs", pid)
	}
}

// TestResumeIdleFails: Resume of a paused sandbox idle past its
// AutoStopInterval stops it, as its init would have, and says so with
// an error matching sandbox.ErrInvalidState; the next command starts it.
func TestResumeIdleFails(t *testing.T) {
	sb := pausedSandbox(t, local.Options{Config: local.Config{AutoStopInterval: time.Hour}})
	ctx := context.Background()
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(local.Dir(sb), "toolbox", "last-used"), long, long); err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(ctx); !errors.Is(err, sandbox.ErrInvalidState) || !strings.Contains(err.Error(), "auto-stop") {
		t.Fatalf("Resume of an idle paused sandbox = %v, want ErrInvalidState naming the auto-stop", err)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Info = %+v, %v; want stopped", info, err)
	}
	if r, err := sb.ExecuteCommand(ctx, "echo back", nil, nil); err != nil || r.Stdout != "back\n" {
		t.Fatalf("command after the idle stop: %+v, %v", r, err)
	}
}

// TestPauseWithoutFreezer: a sandbox whose cgroups were recorded without
// a freezer (made before sandboxes got one) cannot pause: an error
// matching sandbox.ErrUnsupported, and nothing changed.
func TestPauseWithoutFreezer(t *testing.T) {
	testenv.NeedRoot(t, "cgroups need root")
	sb := newSandbox(t, local.Options{})
	path := filepath.Join(local.Dir(sb), "meta.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	cg, _ := m["cgroups"].(map[string]any)
	paths, _ := cg["paths"].(map[string]any)
	if cg == nil || cg["version"] != float64(1) || paths["freezer"] == nil {
		testenv.Skipf(t, "this host's sandboxes have no v1 freezer to drop: %v", cg)
	}
	delete(paths, "freezer")
	legacy, _ := json.Marshal(m)
	if err := os.WriteFile(path, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	err = sb.Pause(context.Background())
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "freezer") {
		t.Fatalf("Pause without a freezer = %v, want ErrUnsupported naming the freezer", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(legacy) {
		t.Error("a refused Pause changed the metadata")
	}
	if r, err := sb.ExecuteCommand(context.Background(), "echo ok", nil, nil); err != nil || r.Stdout != "ok\n" {
		t.Fatalf("command after a refused Pause: %+v, %v", r, err)
	}
}
