//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestConfigMismatch: a handle on an existing sandbox that sets a Config
// field to another value than the sandbox's fails to start, naming every
// such field with both values; unset fields, and fields set to the
// sandbox's values, connect.
func TestConfigMismatch(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	first := newSandbox(t, local.Options{ID: "shape", StateDir: stateDir, Config: local.Config{User: "alice", Labels: map[string]string{"a": "1"}}})
	for _, c := range []local.Config{
		{}, {User: "alice"}, {Language: local.DefaultLanguage}, {WorkingDirectory: "/home/alice/"},
		{AutoStopInterval: local.DefaultAutoStopInterval}, {AutoDeleteInterval: -1}, {Labels: map[string]string{"a": "1"}},
		{Labels: map[string]string{}}, {Volumes: []local.Volume{}},
	} {
		sb, err := local.New(local.Options{ID: "shape", StateDir: stateDir, Config: c})
		if err != nil {
			t.Fatal(err)
		}
		if outcome, err := sb.Start(ctx); err != nil || outcome != sandbox.OutcomeConnected {
			t.Errorf("Config %+v: start %v, %v; want connected", c, outcome, err)
		}
		sb.Close(ctx)
	}

	sb, err := local.New(local.Options{ID: "shape", StateDir: stateDir, Config: local.Config{
		User: "bob", Labels: map[string]string{"a": "2"}, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}, AutoStopInterval: time.Minute,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	_, err = sb.Start(ctx)
	var me *local.ConfigMismatchError
	if !errors.As(err, &me) || !errors.Is(err, local.ErrConfigMismatch) || !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("start with another Config: %v, want a *ConfigMismatchError matching ErrConfigMismatch and ErrInvalidArgument", err)
	}
	want := []local.FieldMismatch{
		{Field: "Labels", Sandbox: map[string]string{"a": "1"}, Requested: map[string]string{"a": "2"}},
		{Field: "User", Sandbox: "alice", Requested: "bob"},
		{Field: "AutoStopInterval", Sandbox: local.DefaultAutoStopInterval, Requested: time.Minute},
		{Field: "Network", Sandbox: sandbox.NetworkPolicy{Mode: sandbox.NetworkPublic}, Requested: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}},
	}
	if me.ID != "shape" || me.StateDir != stateDir || !reflect.DeepEqual(me.Fields, want) {
		t.Errorf("mismatch %+v, want fields %+v", me, want)
	}
	for _, w := range []string{`sandbox "shape"`, `User is "alice", not "bob"`, "Network is public, not blocked",
		"AutoStopInterval is 15m0s, not 1m0s", "remove the sandbox", "another ID"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); !errors.Is(err, local.ErrConfigMismatch) {
		t.Errorf("command on the mismatched handle: %v, want ErrConfigMismatch", err)
	}
	// Nothing changed: the sandbox still has the default network.
	if info, err := localtest.Lookup(ctx, stateDir, "shape"); err != nil || info.Network == nil || info.Network.Mode != sandbox.NetworkPublic || info.Identity.User != "alice" {
		t.Errorf("Lookup after the refused start: %+v, %v", info, err)
	}
	// Also when the sandbox is stopped: a restart would not apply it either.
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sb2, err := local.New(local.Options{ID: "shape", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close(ctx)
	if _, err := sb2.Start(ctx); !errors.As(err, &me) || len(me.Fields) != 1 || me.Fields[0].Field != "Network" {
		t.Errorf("start of a stopped sandbox with another network: %v", err)
	}
}

// TestUnsafeStateDir: a state dir (or sandboxes folder) that another user
// could change is refused by every function, before anything is written.
func TestUnsafeStateDir(t *testing.T) {
	ctx := context.Background()
	type setup func(t *testing.T, dir string)
	chmod := func(rel string, mode os.FileMode) setup {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, rel)
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range []struct {
		name  string
		setup setup
		want  string
	}{
		{"group-writable", chmod(".", 0o770), "is writable by group or others (mode 0770)"},
		{"world-writable sticky", chmod(".", os.ModeSticky|0o777), "is writable by group or others (mode 1777)"},
		{"sandboxes world-writable", chmod("sandboxes", 0o777), "sandboxes is writable by group or others"},
		{"sandboxes a symlink", func(t *testing.T, dir string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(dir, "sandboxes")); err != nil {
				t.Fatal(err)
			}
		}, "sandboxes is a symbolic link"},
		{"owned by another user", func(t *testing.T, dir string) {
			testenv.NeedRoot(t, "needs root to give a folder to another user")
			if err := os.Chown(dir, 2001, 2001); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 2001, not by you (uid 0)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, local.ErrUnsafeStateDir) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
					t.Errorf("%s: %v, want ErrUnsafeStateDir saying %q", what, err, tt.want)
				}
			}
			check("CheckStateDir", local.CheckStateDir(dir))
			sb, err := local.New(local.Options{ID: "x", StateDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(ctx)
			_, err = sb.Start(ctx)
			check("Start", err)
			check("Destroy", sb.Destroy(ctx))
			_, err = local.List(ctx, dir)
			check("List", err)
			_, err = localtest.Lookup(ctx, dir, "x")
			check("Lookup", err)
			check("StopByID", stopByID(ctx, dir, "x"))
			check("Remove", localtest.Destroy(ctx, dir, "x"))
			if ents, _ := os.ReadDir(filepath.Join(dir, "sandboxes")); len(ents) != 0 {
				t.Errorf("a refused state dir got sandboxes: %v", ents)
			}
		})
	}
	// A folder that does not exist yet is fine: it is created private.
	if err := local.CheckStateDir(filepath.Join(t.TempDir(), "new")); err != nil {
		t.Errorf("CheckStateDir of a new folder: %v", err)
	}
}

// TestStateDirSymlink: the state dir may be a symbolic link of this user's
// to a private folder.
func TestStateDirSymlink(t *testing.T) {
	target := newStateDir(t)
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, local.Options{StateDir: link})
	if got := mustRun(t, sb, "echo ok"); got != "ok\n" {
		t.Errorf("sandbox in a linked state dir: %q", got)
	}
	if err := os.Chmod(target, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(target, 0o700)
	if _, err := local.List(context.Background(), link); !errors.Is(err, local.ErrUnsafeStateDir) || !strings.Contains(err.Error(), target) {
		t.Errorf("List through a link to a world-writable folder: %v, want ErrUnsafeStateDir naming %s", err, target)
	}
}

// TestPrivateFolders: the state dir's sandboxes folder, each sandbox folder
// and its home (a folder of the sandbox folder, or of its disk image, which
// is mode 0600) are mode 0700, also for a sandbox made by a version that
// left them open, and the sandbox (whose root is another host uid when
// the engine runs as root) still uses its home.
func TestPrivateFolders(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: stateDir})
	home := filepath.Join(local.Dir(sb), "home")
	private := map[string]os.FileMode{filepath.Join(stateDir, "sandboxes"): 0o700, local.Dir(sb): 0o700, home: 0o700}
	opened := map[string]os.FileMode{local.Dir(sb): 0o711, home: 0o755}
	if _, err := os.Stat(local.DiskImage(sb)); err == nil {
		delete(private, home)
		delete(opened, home)
		private[local.DiskImage(sb)] = 0o600
	}
	checkModes := func(when string) {
		t.Helper()
		if got := mustRun(t, sb, "echo hi > ~/f && cat ~/f && stat -c %a ~"); got != "hi\n700\n" {
			t.Errorf("%s: home inside: %q", when, got)
		}
		for p, mode := range private {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
				t.Errorf("%s: %s: %v, %v; want mode %v", when, p, fi.Mode(), err, mode)
			}
		}
	}
	checkModes("new sandbox")
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for p, mode := range opened {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	checkModes("restarted sandbox of an earlier version")
}

// checkLimitsStated checks that Info states the limits of a sandbox with
// the default Resources: all of them as root, none otherwise, said so.
func checkLimitsStated(t *testing.T, l *sandbox.Limits) {
	t.Helper()
	switch {
	case l == nil:
		t.Error("no limits in Info")
	case os.Geteuid() == 0 && (l.CPUCores == 0 || l.MemoryMB == 0 || l.Processes == 0 || l.DiskMB == 0 || strings.Contains(l.Note, "no ")):
		t.Errorf("limits %+v, want all enforced as root", l)
	case os.Geteuid() != 0 && (l.CPUCores != 0 || l.MemoryMB != 0 || l.Processes != 0 || l.DiskMB != 0 || !strings.Contains(l.Note, "no CPU, memory, process-count or disk limit: cgroups need root")):
		t.Errorf("limits %+v, want none enforced, said so", l)
	}
}

// limitsSentence is how Instructions begins to state the default limits.
func limitsSentence() string {
	if os.Geteuid() == 0 {
		return "Limits: "
	}
	return "No CPU, memory, process-count or disk limit is enforced."
}

// dockerCapMask is Docker's default capability set (DefaultCapabilities)
// as /proc/PID/status shows it.
const dockerCapMask = "00000000a80425fb"

// defaultCapMask is the capability set commands of a default sandbox hold,
// as /proc/PID/status shows it: Docker's with the writable root made of
// the host's folders that root gives, none otherwise.
func defaultCapMask() string {
	if os.Geteuid() == 0 {
		return dockerCapMask
	}
	return "0000000000000000"
}

// defaultCapabilities is what Info says of the capabilities of a default
// sandbox (defaultCapMask).
func defaultCapabilities() string {
	if os.Geteuid() == 0 {
		return strings.Join(local.DefaultCapabilities(), ",")
	}
	return "none"
}

// checkIdentity checks what Info says of who commands run as, the network
// and the limits of a sandbox with the default network and user user.
func checkIdentity(t *testing.T, info *sandbox.Info, user string) {
	t.Helper()
	host, count := os.Geteuid(), 1
	if os.Geteuid() == 0 && info.Identity != nil {
		// A range of its own from the pool: 65536 ids from a multiple of
		// 65536 in [DefaultHostIDBase, HostIDLimit).
		host, count = info.Identity.HostUID, 65536
		if host < local.DefaultHostIDBase || host+count > local.HostIDLimit || host%count != 0 {
			t.Errorf("host uids from %d: not a range of the default pool", host)
		}
	}
	want := &sandbox.Identity{User: user, UID: 0, GID: 0, Home: "/home/" + user, HostUID: host, HostUIDCount: count, Capabilities: defaultCapabilities()}
	if !reflect.DeepEqual(info.Identity, want) {
		t.Errorf("identity %+v, want %+v", info.Identity, want)
	}
	if info.Network == nil || info.Network.Mode != sandbox.NetworkPublic {
		t.Errorf("network %+v, want public", info.Network)
	}
	checkLimitsStated(t, info.Limits)
	if _, ok := info.Metadata["user"]; ok {
		t.Errorf("metadata still has a user: %v", info.Metadata)
	}
}

// TestInfoIdentityTrue checks what Info and Instructions say about who
// commands run as against what a command sees (uid 0 goes by the user's
// name), and that they describe the
// sandbox as it is, not as the handle asked.
func TestInfoIdentityTrue(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	sb := newSandbox(t, local.Options{ID: "who", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	got := mustRun(t, sb, "id -u; id -g; echo $(id -un) $HOME; grep ^CapEff: /proc/self/status; cat /proc/self/uid_map")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := info.Identity
	inside := fmt.Sprintf("%d\n%d\n%s %s\nCapEff:\t%s", id.UID, id.GID, id.User, id.Home, defaultCapMask())
	if len(lines) != 5 || strings.Join(lines[:4], "\n") != inside ||
		strings.Join(strings.Fields(lines[4]), " ") != fmt.Sprintf("0 %d %d", id.HostUID, id.HostUIDCount) {
		t.Errorf("inside: %q; Info says %+v", got, id)
	}
	if info.Network.Mode != sandbox.NetworkBlocked {
		t.Errorf("network %+v, want blocked", info.Network)
	}
	// A second handle with a zero Config describes the sandbox as it is,
	// before it starts too.
	other, err := local.New(local.Options{ID: "who", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	ins := other.Instructions()
	hostIDs := fmt.Sprintf("uids 0-%d are uids %d-%d.", id.HostUIDCount-1, id.HostUID, id.HostUID+id.HostUIDCount-1)
	if id.HostUIDCount == 1 {
		hostIDs = fmt.Sprintf("uid 0 inside is uid %d,", id.HostUID)
	}
	for _, w := range []string{"Network access is blocked.", "Commands run as user agent, uid 0:", hostIDs, limitsSentence()} {
		if !strings.Contains(ins, w) {
			t.Errorf("instructions of a second handle lack %q: %s", w, ins)
		}
	}
	if in, err := other.Info(ctx); err != nil || in.Network.Mode != sandbox.NetworkBlocked {
		t.Errorf("Info of a second handle: %+v, %v", in, err)
	}
}

// TestStopDuringCommand: a command whose sandbox is stopped or removed by
// another handle while it runs fails with an error saying so (matching
// ErrNotReady), whether it streams or not.
func TestStopDuringCommand(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		stream bool
		end    func(ctx context.Context, stateDir, id string) error
	}{
		{"stop", false, stopByID},
		{"stop streaming", true, stopByID},
		{"remove", false, localtest.Destroy},
		{"remove streaming", true, localtest.Destroy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := newStateDir(t)
			sb := newSandbox(t, local.Options{StateDir: stateDir})
			marker := local.HomeFile(sb, "started")
			var opts sandbox.ExecOptions
			if tt.stream {
				opts.Stdout = io.Discard // streams
			}
			done := make(chan error, 1)
			go func() {
				_, err := sb.ExecuteCommand(ctx, "touch ~/started; exec sleep 60", nil, &opts)
				done <- err
			}()
			if !poll(10*time.Second, func() bool { _, err := os.Stat(marker); return err == nil }) {
				t.Fatal("the command did not start")
			}
			if err := tt.end(ctx, stateDir, sb.ID()); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, sandbox.ErrNotReady) || !strings.Contains(err.Error(), "stopped while the command ran") {
					t.Errorf("command: %v, want ErrNotReady saying the sandbox stopped while it ran", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the command did not return")
			}
		})
	}
}
