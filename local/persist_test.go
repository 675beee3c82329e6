//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestStopStartKeepsFiles(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{})
	mustRun(t, sb, "echo home > ~/h.txt && echo tmp > /tmp/state.txt && mkdir -p ~/proj && echo x > ~/proj/y")
	pid := local.InitPID(sb)
	ns := pidNS(pid)
	// Stop ends every process: a daemon (setsid, detached from the
	// command), a background job of a command, and a spawned process.
	mustRun(t, sb, "setsid sleep 4051 </dev/null >/dev/null 2>&1 & sleep 4052 </dev/null >/dev/null 2>&1 &")
	if _, err := sb.Processes().Spawn(ctx, "sleep 4053", nil); err != nil {
		t.Fatal(err)
	}
	waitRunning(ns, "sleep 405", 3)
	if l := leftovers(ns, "sleep 405"); len(l) != 3 {
		t.Fatalf("before Stop, running: %q; want the 3 sleeps", l)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if p := procsInNS(ns); len(p) != 0 {
		t.Errorf("processes left in the sandbox after Stop: %v", p)
	}
	if sb.Status() != sandbox.StatusStopped || local.InitPID(sb) != 0 {
		t.Fatalf("after Stop: status %s, init pid %d", sb.Status(), local.InitPID(sb))
	}
	if _, alive := syscall.Getpgid(pid); alive == nil {
		t.Errorf("init %d still alive after Stop", pid)
	}
	info, err := localtest.Lookup(ctx, sb.StateDir(), sb.ID())
	if err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Lookup after stop: %v %v", info, err)
	}
	outcome, err := sb.Start(ctx)
	if err != nil || outcome != sandbox.OutcomeConnected {
		t.Fatalf("restart: %v %v, want connected (an existing sandbox is found)", outcome, err)
	}
	if got := mustRun(t, sb, "cat ~/h.txt /tmp/state.txt ~/proj/y"); got != "home\ntmp\nx\n" {
		t.Errorf("files after restart: %q", got)
	}
	// Commands also run right after a restart through the same object.
	if got := mustRun(t, sb, "echo again"); got != "again\n" {
		t.Errorf("got %q", got)
	}
}

func TestReconnectAfterKill9(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	id := "reconnect-test"
	helper, out, _ := startHelper(t, "hold", stateDir, id, false)
	line := readLine(t, out)
	if !strings.HasPrefix(line, "ready created ") {
		t.Fatalf("helper: %q", line)
	}
	if err := helper.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	helper.Wait()

	sb, err := local.New(local.Options{ID: id, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	var initPID int
	defer func() {
		if err := sb.Destroy(ctx); err != nil {
			t.Error(err)
		}
		reapZombie(initPID)
	}()
	outcome, err := sb.Start(ctx)
	if err != nil || outcome != sandbox.OutcomeConnected {
		t.Fatalf("reconnect: %v %v", outcome, err)
	}
	initPID = local.InitPID(sb)
	if got := mustRun(t, sb, "cat ~/data.txt /tmp/state.txt"); got != "precious\ntemp\n" {
		t.Errorf("files after reconnect: %q", got)
	}
	// The background process still runs, and the toolbox still tracks it.
	sessions, err := sb.Client().ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range sessions {
		for _, c := range s.Commands {
			if strings.Contains(c.Command, "sleep 3031") && c.ExitCode == nil {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("running `sleep 3031` not found in sessions %+v", sessions)
	}
	if got := mustRun(t, sb, "pgrep -fx 'sleep 3031' | wc -l"); strings.TrimSpace(got) != "1" {
		t.Errorf("sleep 3031 processes inside: %q", got)
	}
}

// TestEgressProxyOutlivesEngine: the egress proxy that an engine process
// started for its sandbox goes on serving it after that process exits
// (the CLI creates a sandbox in one process and runs commands in
// others), and another process that finds it dead starts it again.
func TestEgressProxyOutlivesEngine(t *testing.T) {
	testenv.Need(t, haveCurl(), "curl is not installed: the probe runs it inside the sandbox")
	port := originServer(t)
	stateDir := newStateDir(t)
	id := "egress-outlives"
	t.Setenv("HELPER_DOMAINS", "allowed.test")
	helper, out, _ := startHelper(t, "start", stateDir, id, false)
	if line := readLine(t, out); line != "outcome created" {
		t.Fatalf("helper: %q", line)
	}
	if err := helper.Wait(); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{ID: id, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		pid := local.InitPIDOf(stateDir, id)
		if err := sb.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
		reapZombie(pid)
	}()
	local.SetEgressTestHooks(sb, testHosts, true)
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := local.EgressProxyPID(sb)
	if pid == 0 {
		t.Fatal("no egress proxy serves the sandbox after its creator exited")
	}
	if code, out := curl(t, sb, "http://allowed.test:"+port+"/a"); code != 0 || out != "origin /a host=allowed.test:"+port {
		t.Errorf("through the proxy of the exited engine: exit %d %q", code, out)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	processGone(pid)
	if code, out := curl(t, sb, "http://allowed.test:"+port+"/b"); code != 0 || out != "origin /b host=allowed.test:"+port {
		t.Errorf("after the proxy died: exit %d %q", code, out)
	}
	if p := local.EgressProxyPID(sb); p == 0 || p == pid {
		t.Errorf("proxy after it died: %d (before: %d)", p, pid)
	}
}

// TestCloseDetachesWithoutStopping: Close releases the handle (its pooled
// sessions and background processes) while the sandbox keeps running for
// the next handle.
func TestCloseDetachesWithoutStopping(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{})
	mustRun(t, sb, "echo kept > ~/close.txt")
	p, err := sb.Processes().Spawn(ctx, "sleep 300", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := local.InitPID(sb)
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, done := p.ExitCode(); !done {
		t.Error("a process spawned through the closed handle is still running")
	}
	other, err := local.New(local.Options{ID: sb.ID(), StateDir: sb.StateDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	outcome, err := other.Start(ctx)
	if err != nil || outcome != sandbox.OutcomeConnected {
		t.Fatalf("new handle: outcome %v, err %v; want connected", outcome, err)
	}
	if local.InitPID(other) != pid {
		t.Errorf("init changed from %d to %d: Close must not stop the sandbox", pid, local.InitPID(other))
	}
	if got := mustRun(t, other, "cat ~/close.txt"); got != "kept\n" {
		t.Errorf("got %q", got)
	}
	sessions, err := other.Client().ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Only the new handle's own pooled session may remain.
	if len(sessions) > 1 {
		t.Errorf("sessions left behind by the closed handle: %v", sessions)
	}
}

// TestOldMetadataLoads: a state dir written before Config (name and labels
// at the top of meta.json, a per-handle timeout among the options) still
// loads: Lookup describes the sandbox, Start restarts it with its shape and
// files, and the metadata it then writes keeps the name and labels.
func TestOldMetadataLoads(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	dir := filepath.Join(stateDir, "sandboxes", "old")
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "home", "kept.txt"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As the previous version wrote it for a stopped sandbox.
	const old = `{
  "id": "old",
  "name": "old box",
  "labels": {
    "team": "b"
  },
  "createdAt": "2026-11-01T10:00:00Z",
  "status": "stopped",
  "stoppedAt": "2026-11-01T11:00:00Z",
  "lastUsedAt": "2026-11-01T10:59:00Z",
  "options": {
    "user": "bob",
    "language": "python",
    "workingDirectory": "/work",
    "timeout": 300000000000,
    "autoStopInterval": 900000000000,
    "volumes": [
      {
        "name": "v",
        "mountPath": "/data"
      }
    ],
    "networkBlockAll": true
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		info, err := localtest.Lookup(ctx, stateDir, "old")
		if err != nil {
			t.Fatalf("Lookup %s: %v", when, err)
		}
		created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
		if md := info.Metadata; md["name"] != "old box" || md["team"] != "b" || info.Identity == nil || info.Identity.User != "bob" || md["language"] != "python" ||
			info.Network == nil || info.Network.Mode != sandbox.NetworkBlocked ||
			!info.CreatedAt.Equal(created) || len(info.Mounts) != 1 || info.Mounts[0].Path != "/data" {
			t.Errorf("Lookup %s: %+v", when, info)
		}
	}
	check("of the old metadata")

	sb := openSandbox(t, local.Options{ID: "old", StateDir: stateDir})
	if outcome, err := sb.Start(ctx); err != nil || outcome != sandbox.OutcomeConnected {
		t.Fatalf("start: %v %v, want connected", outcome, err)
	}
	if got := mustRun(t, sb, "echo $HOME; pwd; cat ~/kept.txt"); got != "/home/bob\n/work\nkept\n" {
		t.Errorf("inside the restarted sandbox: %q", got)
	}
	if ins := sb.Instructions(); !strings.Contains(ins, "(python runtime)") || !strings.Contains(ins, "Network access is blocked.") {
		t.Errorf("instructions: %s", ins)
	}
	check("after a start rewrote the metadata")
}
