//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	stateDir := t.TempDir()
	for _, id := range []string{"a/b", "..", "a..b", "../etc", "-x", "", strings.Repeat("x", 65), "sp ace"} {
		if id == "" {
			continue // empty means "generate one"
		}
		if _, err := local.New(local.Options{ID: id, StateDir: stateDir}); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("New(id %q): %v, want ErrInvalidArgument", id, err)
		}
		if _, err := localtest.Lookup(ctx, stateDir, id); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Lookup(%q): %v, want ErrInvalidArgument", id, err)
		}
		if err := localtest.Destroy(ctx, stateDir, id); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Remove(%q): %v, want ErrInvalidArgument", id, err)
		}
	}
	if _, err := localtest.Lookup(ctx, stateDir, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Lookup(unknown): %v, want ErrNotFound", err)
	}
	if err := localtest.Destroy(ctx, stateDir, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Remove(unknown): %v, want ErrNotFound", err)
	}
	if err := stopByID(ctx, stateDir, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("StopByID(unknown): %v, want ErrNotFound", err)
	}
	for _, o := range []local.Options{
		{Config: local.Config{WorkingDirectory: "relative"}},
		{Config: local.Config{WorkingDirectory: "/usr/x"}},
		{Config: local.Config{User: "Bad User"}},
		{Env: map[string]string{"1X": "y"}},
		{Config: local.Config{Volumes: []local.Volume{{Name: "../v", MountPath: "/data"}}}},
		{Config: local.Config{Volumes: []local.Volume{{Name: "v", MountPath: "/etc/v"}}}},
		{Config: local.Config{Volumes: []local.Volume{{Name: "v", MountPath: "data"}}}},
		{Timeout: -time.Second},
	} {
		o.StateDir = stateDir
		if _, err := local.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
		t.Errorf("bad input left files in the state dir: %v", ents)
	}
}

func TestReadOnlyStateDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// Root ignores permission bits: make the folder a read-only mount.
		err := unix.Mount(dir, dir, "", unix.MS_BIND, "")
		testenv.Need(t, err == nil, fmt.Sprintf("as root, needs a read-only bind mount to make the state dir unwritable, and mount fails: %v", err))
		defer unix.Unmount(dir, unix.MNT_DETACH)
		if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
	} else {
		os.Chmod(dir, 0o500)
		defer os.Chmod(dir, 0o700)
	}
	sb := openSandbox(t, local.Options{StateDir: filepath.Join(dir, "state")})
	_, err := sb.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("Start with a read-only state dir: %v, want a 'not writable' error", err)
	}
	if sb.Status() != sandbox.StatusError {
		t.Errorf("status %s, want error", sb.Status())
	}
	if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("command on a sandbox that cannot start: %v, want ErrNotReady", err)
	}
}

func TestConcurrentStartFromTwoProcesses(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	id := "concurrent"
	var gos []func() error
	type helper struct {
		wait func() error
		read func() string
	}
	var hs []helper
	for i := 0; i < 2; i++ {
		cmd, out, goFn := startHelper(t, "start", stateDir, id, true)
		gos = append(gos, goFn)
		hs = append(hs, helper{cmd.Wait, func() string { return readLine(t, out) }})
	}
	for _, g := range gos {
		g()
	}
	var outcomes []string
	for _, h := range hs {
		outcomes = append(outcomes, h.read())
		if err := h.wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}
	created, connected := 0, 0
	for _, o := range outcomes {
		switch o {
		case "outcome created":
			created++
		case "outcome connected":
			connected++
		default:
			t.Errorf("helper said %q", o)
		}
	}
	if created != 1 || connected != 1 {
		t.Errorf("outcomes %q, want one created and one connected", outcomes)
	}
	list, err := local.List(ctx, stateDir)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Status != sandbox.StatusRunning {
		t.Fatalf("List: %+v %v", list, err)
	}
	sb, err := local.New(local.Options{ID: id, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	pid := local.InitPID(sb)
	if err := localtest.Destroy(ctx, stateDir, id); err != nil {
		t.Fatal(err)
	}
	reapZombie(pid)
	if list, _ := local.List(ctx, stateDir); len(list) != 0 {
		t.Errorf("List after Remove: %+v", list)
	}
}

// An idle interval long enough that a loaded machine's first command
// comes before it ends (the init idles from its start): 200–300 ms let the
// sandbox stop before the command in 1 of 10 race runs under load.
func TestAutoStopAndEphemeral(t *testing.T) {
	ctx := context.Background()
	sb := openSandbox(t, local.Options{Config: local.Config{AutoStopInterval: 1500 * time.Millisecond, Ephemeral: true}})
	stateDir := sb.StateDir()
	mustRun(t, sb, "echo x > ~/f")
	waitAutoStop(t, sb)
	// The stopped ephemeral sandbox is gone as soon as anyone looks.
	if _, err := localtest.Lookup(ctx, stateDir, sb.ID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Lookup of an auto-stopped ephemeral sandbox: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(local.Dir(sb)); !os.IsNotExist(err) {
		t.Errorf("folder of the ephemeral sandbox left: %v", err)
	}
}

func TestEphemeralStopDestroys(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{Ephemeral: true}})
	mustRun(t, sb, "true")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(local.Dir(sb)); !os.IsNotExist(err) {
		t.Errorf("ephemeral sandbox folder after Stop: %v", err)
	}
}

func TestInfoAndInstructions(t *testing.T) {
	ctx := context.Background()
	sb := openSandbox(t, local.Options{Timeout: 90 * time.Second, Config: local.Config{
		Name: "my box", Labels: map[string]string{"team": "a"}, Language: "python",
		User: "dev", Volumes: []local.Volume{{Name: "cache", MountPath: "/cache", ReadOnly: true}},
		WorkingDirectory: "/workspace",
	}})
	want := "Local sandbox with isolated execution (python runtime)"
	ins := sb.Instructions()
	for _, w := range []string{want, "Default working directory: /workspace.", "Command timeout: 90s.",
		"root of the sandbox's own user namespace with no capabilities (unprivileged on the host); HOME=/home/dev.",
		"1 volume(s) attached: /cache (read-only).", "Network access is limited to the public internet",
		"persist across stop and start."} {
		if !strings.Contains(ins, w) {
			t.Errorf("instructions lack %q: %s", w, ins)
		}
	}
	if strings.Contains(ins, "Running as user") || strings.Contains(ins, "ephemeral") {
		t.Errorf("instructions: %s", ins)
	}
	// An ephemeral sandbox does not keep its files.
	eph, err := local.New(local.Options{StateDir: t.TempDir(), Config: local.Config{Ephemeral: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ins := eph.Instructions(); strings.Contains(ins, "persist") || !strings.Contains(ins, "it and its files are deleted when it stops.") {
		t.Errorf("ephemeral instructions: %s", ins)
	}
	info, err := sb.Info(ctx)
	if err != nil || info.Status != sandbox.StatusPending || info.Provider != "local" {
		t.Fatalf("Info before start: %+v %v", info, err)
	}
	// What the instructions claim: root of the user namespace, Docker's
	// capabilities with the writable root (as root) or none, HOME=/home/dev.
	if got := mustRun(t, sb, "id -u; grep ^CapEff: /proc/self/status"); got != "0\nCapEff:\t"+defaultCapMask()+"\n" {
		t.Errorf("identity inside: %q", got)
	}
	if got := mustRun(t, sb, "pwd; echo $HOME; echo hi > /workspace/f; touch /cache/x 2>&1 || echo ro"); !strings.HasPrefix(got, "/workspace\n/home/dev\n") || !strings.Contains(got, "ro") {
		t.Errorf("inside: %q", got)
	}
	info, err = sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != sandbox.StatusRunning || info.Name != "LocalSandbox" || info.Metadata["name"] != "my box" || info.Metadata["team"] != "a" ||
		info.Metadata["language"] != "python" || info.CreatedAt.IsZero() {
		t.Errorf("Info: %+v", info)
	}
	if len(info.Mounts) != 1 || info.Mounts[0].Path != "/cache" {
		t.Errorf("mounts: %+v", info.Mounts)
	}
	checkIdentity(t, info, "dev")
	if os.Geteuid() == 0 && (info.Usage == nil || info.Usage.MemoryUsedMB <= 0) {
		t.Errorf("resources: %+v", info.Usage)
	}
	list, err := local.List(ctx, sb.StateDir())
	if err != nil || len(list) != 1 || list[0].Status != sandbox.StatusRunning {
		t.Errorf("List: %+v %v", list, err)
	}
}

func TestAutoStopThenCommandRestarts(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{AutoStopInterval: 1500 * time.Millisecond}})
	mustRun(t, sb, "echo kept > ~/f")
	waitAutoStop(t, sb)
	info, err := localtest.Lookup(context.Background(), sb.StateDir(), sb.ID())
	if err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Lookup after auto-stop: %+v %v", info, err)
	}
	if got := mustRun(t, sb, "cat ~/f"); got != "kept\n" {
		t.Errorf("after auto-stop and restart: %q", got)
	}
}

func TestAutoDelete(t *testing.T) {
	ctx := context.Background()
	sb := openSandbox(t, local.Options{Config: local.Config{AutoDeleteInterval: 100 * time.Millisecond}})
	stateDir := sb.StateDir()
	mustRun(t, sb, "true")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := localtest.Lookup(ctx, stateDir, sb.ID()); err != nil {
		t.Fatalf("Lookup right after stop: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	if list, err := local.List(ctx, stateDir); err != nil || len(list) != 0 {
		t.Errorf("List after the auto-delete interval: %+v %v", list, err)
	}
	if _, err := os.Stat(local.Dir(sb)); !os.IsNotExist(err) {
		t.Errorf("folder left: %v", err)
	}
}

func TestReconnectKeepsShape(t *testing.T) {
	stateDir := newStateDir(t)
	first := newSandbox(t, local.Options{ID: "shape", StateDir: stateDir, Config: local.Config{User: "alice", WorkingDirectory: "/work"}})
	mustRun(t, first, "echo hi > note")
	// A second object with default options connects to the same sandbox
	// and reports what it really is.
	second, err := local.New(local.Options{ID: "shape", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	outcome, err := second.Start(context.Background())
	if err != nil || outcome != "connected" {
		t.Fatalf("second start: %v %v", outcome, err)
	}
	if got := mustRun(t, second, "pwd; cat note; echo $HOME"); got != "/work\nhi\n/home/alice\n" {
		t.Errorf("second object sees %q", got)
	}
	if ins := second.Instructions(); !strings.Contains(ins, "HOME=/home/alice.") || !strings.Contains(ins, "Default working directory: /work.") {
		t.Errorf("instructions of the second object: %s", ins)
	}
	second.Client().Close()
}

func TestLongStateDirAndSharedVolume(t *testing.T) {
	// A state dir so deep that the socket path exceeds a unix socket
	// address (about 107 bytes).
	stateDir := filepath.Join(newStateDir(t), strings.Repeat("d", 60), strings.Repeat("e", 60))
	vol := []local.Volume{{Name: "shared", MountPath: "/shared"}}
	a := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Volumes: vol, WorkingDirectory: "/shared/proj"}})
	b := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Volumes: vol}})
	if got := mustRun(t, a, "pwd && echo from-a > note"); got != "/shared/proj\n" {
		t.Errorf("pwd in a: %q", got)
	}
	if got := mustRun(t, b, "cat /shared/proj/note && echo from-b >> /shared/proj/note"); got != "from-a\n" {
		t.Errorf("b reads %q", got)
	}
	if got := mustRun(t, a, "cat note"); got != "from-a\nfrom-b\n" {
		t.Errorf("a reads %q", got)
	}
}

func TestEnvOverlay(t *testing.T) {
	sb := newSandbox(t, local.Options{Env: map[string]string{"FROM_OPTIONS": "opt-value-6502"}})
	if err := sb.SetEnv(func(env map[string]string) map[string]string {
		env["API_TOKEN"] = "tok-value-8086"
		return env
	}); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetEnv(func(env map[string]string) map[string]string {
		env["1BAD"] = "x"
		return env
	}); !errors.Is(err, sandbox.ErrInvalidEnv) {
		t.Errorf("SetEnv with a bad name: %v", err)
	}
	if got := mustRun(t, sb, "echo $FROM_OPTIONS $API_TOKEN"); got != "opt-value-6502 tok-value-8086\n" {
		t.Errorf("overlay inside: %q", got)
	}
	// The overlay reaches commands but is not stored in the user's files.
	if got := run(t, sb, "grep -rls -e tok-value-8086 -e opt-value-6502 /home /tmp"); got.Stdout != "" {
		t.Errorf("overlay values written to %q", got.Stdout)
	}
}

func TestHooks(t *testing.T) {
	ctx := context.Background()
	var calls []string
	sb := openSandbox(t, local.Options{Hooks: sandbox.Hooks{
		OnStart: func(_ context.Context, id string, o sandbox.Outcome) error {
			calls = append(calls, "start:"+string(o))
			return nil
		},
		OnStop:    func(context.Context, string) error { calls = append(calls, "stop"); return nil },
		OnDestroy: func(context.Context, string) error { calls = append(calls, "destroy"); return nil },
	}})
	mustRun(t, sb, "true")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mustRun(t, sb, "true")
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, " "); got != "start:created stop start:connected destroy" {
		t.Errorf("hooks ran: %s", got)
	}
}

// TestLastUsedAndTimeoutAt: the init stamps the toolbox API's use where
// host processes read it, so that Lookup, List and Info tell when the
// sandbox was last used and, with auto-stop on, when it will stop.
func TestLastUsedAndTimeoutAt(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{AutoStopInterval: time.Hour}})
	lookup := func() *sandbox.Info {
		t.Helper()
		info, err := localtest.Lookup(ctx, sb.StateDir(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	before := time.Now()
	mustRun(t, sb, "true")
	// The stamp trails the last request by a second at most.
	var first *sandbox.Info
	poll(3*time.Second, func() bool {
		first = lookup()
		return !first.LastUsedAt.Before(before)
	})
	if first.LastUsedAt.IsZero() || first.LastUsedAt.Before(first.CreatedAt) || first.LastUsedAt.After(time.Now()) {
		t.Fatalf("LastUsedAt %v, created %v: want a time since the creation", first.LastUsedAt, first.CreatedAt)
	}
	if want := first.LastUsedAt.Add(time.Hour); !first.TimeoutAt.Equal(want) {
		t.Errorf("TimeoutAt %v, want LastUsedAt + AutoStopInterval = %v", first.TimeoutAt, want)
	}
	before = time.Now()
	mustRun(t, sb, "true")
	var second *sandbox.Info
	poll(3*time.Second, func() bool {
		second = lookup()
		return !second.LastUsedAt.Before(before)
	})
	if second.LastUsedAt.Before(before) {
		t.Fatalf("LastUsedAt %v after a command run at %v (before: %v)", second.LastUsedAt, before, first.LastUsedAt)
	}
	if info, err := sb.Info(ctx); err != nil || !info.LastUsedAt.Equal(second.LastUsedAt) || !info.TimeoutAt.Equal(second.TimeoutAt) {
		t.Errorf("Info: %+v %v, want the times of Lookup %v, %v", info, err, second.LastUsedAt, second.TimeoutAt)
	}
	if list, err := local.List(ctx, sb.StateDir()); err != nil || len(list) != 1 || !list[0].LastUsedAt.Equal(second.LastUsedAt) {
		t.Errorf("List: %+v %v", list, err)
	}
	// A stopped sandbox keeps its last use and has no stop ahead.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := lookup()
	if stopped.LastUsedAt.Before(second.LastUsedAt) || !stopped.TimeoutAt.IsZero() {
		t.Errorf("after Stop: LastUsedAt %v (want >= %v), TimeoutAt %v (want none)", stopped.LastUsedAt, second.LastUsedAt, stopped.TimeoutAt)
	}
	if info, err := sb.Info(ctx); err != nil || !info.LastUsedAt.Equal(stopped.LastUsedAt) || !info.TimeoutAt.IsZero() {
		t.Errorf("Info after Stop: %+v %v", info, err)
	}

	// Without auto-stop there is no stop time.
	never := newSandbox(t, local.Options{Config: local.Config{AutoStopInterval: -1}})
	mustRun(t, never, "true")
	if info, err := never.Info(ctx); err != nil || info.LastUsedAt.IsZero() || !info.TimeoutAt.IsZero() {
		t.Errorf("Info without auto-stop: %+v %v, want LastUsedAt and no TimeoutAt", info, err)
	}
}

// TestDefaultStateDir: AGENTBOX_STATE_DIR wins over XDG_STATE_HOME, which
// wins over ~/.local/state/agentbox, then $XDG_RUNTIME_DIR/agentbox; with
// none of them, no default (never a folder other users share, such as the
// temp dir).
func TestDefaultStateDir(t *testing.T) {
	for _, c := range []struct {
		name, agentbox, xdg, home, runtime, want string
	}{
		{"all set", "/s/agentbox", "/s/xdg", "/s/home", "/s/run", "/s/agentbox"},
		{"agentbox only", "/s/agentbox", "", "", "", "/s/agentbox"},
		{"xdg over home", "", "/s/xdg", "/s/home", "/s/run", "/s/xdg/agentbox"},
		{"relative xdg ignored", "", "xdg", "/s/home", "", "/s/home/.local/state/agentbox"},
		{"home", "", "", "/s/home", "/s/run", "/s/home/.local/state/agentbox"},
		{"runtime dir without a home", "", "", "", "/s/run", "/s/run/agentbox"},
		{"relative runtime dir ignored", "", "", "", "run", ""},
		{"nothing", "", "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTBOX_STATE_DIR", c.agentbox)
			t.Setenv("XDG_STATE_HOME", c.xdg)
			t.Setenv("HOME", c.home)
			t.Setenv("XDG_RUNTIME_DIR", c.runtime)
			got, err := local.DefaultStateDir()
			if c.want == "" {
				if !errors.Is(err, local.ErrNoStateDir) || !strings.Contains(err.Error(), "set AGENTBOX_STATE_DIR") || got != "" {
					t.Errorf("DefaultStateDir() = %q, %v; want ErrNoStateDir telling to set AGENTBOX_STATE_DIR", got, err)
				}
				if _, err := local.New(local.Options{}); !errors.Is(err, local.ErrNoStateDir) {
					t.Errorf("New without a state dir: %v, want ErrNoStateDir", err)
				}
				return
			}
			if got != c.want || err != nil {
				t.Errorf("DefaultStateDir() = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestOpen: Open finds an existing sandbox by id without starting it,
// with the sandbox's own configuration and status; a handle from Open
// restarts a stopped sandbox with that configuration, and stops it.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{
		Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked},
		Labels:  map[string]string{"team": "a"},
	}})
	mustRun(t, sb, "echo kept > ~/file")
	must(t, sb.Stop(ctx))

	h, err := local.Open(ctx, stateDir, sb.ID())
	must(t, err)
	if h.Status() != sandbox.StatusStopped {
		t.Errorf("status of a stopped sandbox's handle: %s, want stopped", h.Status())
	}
	if pid := local.InitPIDOf(stateDir, sb.ID()); pid != 0 {
		t.Fatalf("Open started the sandbox: init %d", pid)
	}
	info, err := h.Info(ctx)
	if err != nil || info.Status != sandbox.StatusStopped || info.Network.Mode != sandbox.NetworkBlocked || info.Metadata["team"] != "a" {
		t.Fatalf("Info of the handle: %+v %v, want the stopped sandbox with its network and labels", info, err)
	}
	if out := mustRun(t, h, "cat ~/file"); out != "kept\n" {
		t.Errorf("file through the handle, which restarts the sandbox: %q", out)
	}
	if info, err := h.Info(ctx); err != nil || info.Network.Mode != sandbox.NetworkBlocked {
		t.Errorf("network after the restart: %+v %v, want blocked (the sandbox's own)", info, err)
	}
	must(t, h.Close(ctx)) // the sandbox keeps running
	running := opened(t, stateDir, sb.ID())
	if running.Status() != sandbox.StatusRunning {
		t.Errorf("status of a running sandbox's handle: %s, want running", running.Status())
	}
	must(t, running.Stop(ctx))
	if pid := local.InitPIDOf(stateDir, sb.ID()); pid != 0 {
		t.Errorf("Stop of a handle from Open left init %d running", pid)
	}
}
