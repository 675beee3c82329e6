//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// fork forks sb, failing t on an error; the fork is destroyed when t ends.
func fork(t *testing.T, sb *local.Sandbox, opts sandbox.ForkOptions) *local.Sandbox {
	t.Helper()
	f, err := sb.Fork(context.Background(), opts)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	t.Cleanup(func() { _ = f.Destroy(context.Background()) })
	return f
}

// spawnSleep starts a background sleep in sb (through its process
// manager) and returns its pid inside the sandbox.
func spawnSleep(t *testing.T, sb *local.Sandbox) string {
	t.Helper()
	if _, err := sb.Processes().Spawn(context.Background(), "echo $$ > /tmp/bg.pid && exec sleep 600", nil); err != nil {
		t.Fatal(err)
	}
	var pid string
	if !poll(10*time.Second, func() bool {
		pid = strings.TrimSpace(run(t, sb, "cat /tmp/bg.pid 2>/dev/null").Stdout)
		return pid != ""
	}) {
		t.Fatal("the background process never wrote its pid")
	}
	return pid
}

// TestForkRunning: the fork of a running sandbox runs, has the files the
// source wrote in its home, /tmp and its root (/usr/local), with their
// owners and modes inside, and the source keeps running: a background
// process started before the fork is still alive.
func TestForkRunning(t *testing.T) {
	testenv.NeedRoot(t, "needs root: the freezer and host ids of a sandbox's own")
	sb := newSandbox(t, local.Options{})
	pid := spawnSleep(t, sb)
	mustRun(t, sb, "echo home > ~/h && echo tmp > /tmp/t && echo root > /usr/local/r && chown 1000:1000 ~/h && chmod 4755 /usr/local/r")
	f := fork(t, sb, sandbox.ForkOptions{})
	if f.Status() != sandbox.StatusRunning || f.ID() == sb.ID() {
		t.Fatalf("fork %s: status %s, want a running sandbox with a new id", f.ID(), f.Status())
	}
	want := "home\ntmp\nroot\n1000:1000 -rwsr-xr-x\n"
	if got := mustRun(t, f, "cat ~/h /tmp/t /usr/local/r; stat -c '%u:%g' ~/h | tr '\\n' ' '; stat -c %A /usr/local/r"); got != want {
		t.Errorf("the fork reads %q, want %q", got, want)
	}
	if got := run(t, sb, "kill -0 "+pid).ExitCode; got != 0 {
		t.Errorf("the source's background process after the fork: kill -0 exit %d, want alive", got)
	}
}

// TestForkStopped: the fork of a stopped sandbox is stopped, and has the
// source's files once started.
func TestForkStopped(t *testing.T) {
	sb := newSandbox(t, local.Options{})
	mustRun(t, sb, "echo kept > ~/k")
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := fork(t, sb, sandbox.ForkOptions{})
	if f.Status() != sandbox.StatusStopped {
		t.Fatalf("fork of a stopped sandbox: status %s, want stopped", f.Status())
	}
	if got := mustRun(t, f, "cat ~/k"); got != "kept\n" {
		t.Errorf("the fork's file: %q, want kept", got)
	}
	if sb.Status() != sandbox.StatusStopped {
		t.Errorf("the source after the fork: %s, want stopped still", sb.Status())
	}
}

// TestForkDiverges: after the fork, writes on either side are not seen
// by the other.
func TestForkDiverges(t *testing.T) {
	sb := newSandbox(t, local.Options{})
	mustRun(t, sb, "echo v1 > ~/f")
	f := fork(t, sb, sandbox.ForkOptions{})
	mustRun(t, sb, "echo source > ~/f")
	mustRun(t, f, "echo fork > ~/f && touch ~/only-fork")
	if got := mustRun(t, sb, "cat ~/f; ls ~"); got != "source\nf\n" {
		t.Errorf("the source: %q, want its own write only", got)
	}
	if got := mustRun(t, f, "cat ~/f"); got != "fork\n" {
		t.Errorf("the fork: %q, want its own write only", got)
	}
}

// TestForkImageRoot: the fork of a sandbox made of an image has its
// changes to the image's root, and keeps working when the source is
// destroyed (it holds the image too).
func TestForkImageRoot(t *testing.T) {
	ctx := context.Background()
	_, _, sb := newImageSandbox(t)
	mustRun(t, sb, "echo installed > /usr/bin/newtool && rm /usr/share/marker")
	f := fork(t, sb, sandbox.ForkOptions{})
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, f, "cat /usr/bin/newtool; test -e /usr/share/marker || echo deleted; cat /etc/os-release"); got != "installed\ndeleted\n"+imageOSRelease {
		t.Errorf("the fork of an image sandbox, restarted after the source's removal: %q, want the new file, the deletion and the image's files", got)
	}
}

// TestForkVolumeShared: a fork mounts the source's volumes, shared: a
// write through one is seen by the other.
func TestForkVolumeShared(t *testing.T) {
	sb := newSandbox(t, local.Options{Config: local.Config{Volumes: []local.Volume{{Name: "shared", MountPath: "/data"}}}})
	f := fork(t, sb, sandbox.ForkOptions{})
	mustRun(t, f, "echo from-fork > /data/x")
	if got := mustRun(t, sb, "cat /data/x"); got != "from-fork\n" {
		t.Errorf("the source reads %q from the shared volume, want the fork's write", got)
	}
}

// TestForkNetworkPolicy: a fork keeps the source's network policy.
func TestForkNetworkPolicy(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	f := fork(t, sb, sandbox.ForkOptions{})
	a, _ := sb.Info(ctx)
	b, err := f.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Network.Mode != a.Network.Mode || b.Network.Mode != sandbox.NetworkBlocked {
		t.Errorf("the fork's network mode %q, want the source's %q (blocked)", b.Network.Mode, a.Network.Mode)
	}
}

// TestForkNameLabels: the fork has the id, name and labels ForkOptions
// give it, and its own host ids.
func TestForkNameLabels(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{Name: "src", Labels: map[string]string{"a": "1"}}})
	f := fork(t, sb, sandbox.ForkOptions{ID: "the-fork", Name: "copy", Labels: map[string]string{"b": "2"}})
	info, err := f.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := sb.Info(ctx)
	if info.ID != "the-fork" || info.Metadata["name"] != "copy" || info.Metadata["b"] != "2" || info.Metadata["a"] != "" {
		t.Errorf("the fork's id %q and metadata %v, want the-fork, name copy and only label b", info.ID, info.Metadata)
	}
	if os.Geteuid() == 0 && info.Identity.HostUID == src.Identity.HostUID {
		t.Errorf("the fork's host uid %d is the source's", info.Identity.HostUID)
	}
}

// TestForkBadInput: a fork of a missing sandbox, to a taken or malformed
// id, or of a destroyed sandbox fails with the error naming why, and
// makes nothing.
func TestForkBadInput(t *testing.T) {
	ctx := context.Background()
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state})
	other := newSandbox(t, local.Options{StateDir: state})
	missing := openSandbox(t, local.Options{StateDir: state})
	gone := newSandbox(t, local.Options{StateDir: state})
	if err := gone.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sb   *local.Sandbox
		opts sandbox.ForkOptions
		want error
	}{
		{"missing source", missing, sandbox.ForkOptions{}, sandbox.ErrNotFound},
		{"taken id", sb, sandbox.ForkOptions{ID: other.ID()}, sandbox.ErrInvalidArgument},
		{"the source's id", sb, sandbox.ForkOptions{ID: sb.ID()}, sandbox.ErrInvalidArgument},
		{"malformed id", sb, sandbox.ForkOptions{ID: "../x"}, sandbox.ErrInvalidArgument},
		{"destroyed source", gone, sandbox.ForkOptions{}, sandbox.ErrInvalidState},
	} {
		if _, err := c.sb.Fork(ctx, c.opts); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error matching %v", c.name, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "sandboxes")); len(ents) != 2 {
		t.Errorf("sandbox folders after the failed forks: %v, want the two sandboxes only", ents)
	}
}

// TestForkCleanup: destroying a fork leaves no folder behind and the
// source intact.
func TestForkCleanup(t *testing.T) {
	ctx := context.Background()
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state})
	mustRun(t, sb, "echo src > ~/f")
	f := fork(t, sb, sandbox.ForkOptions{})
	if err := f.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(state, "sandboxes"))
	if len(ents) != 1 || ents[0].Name() != sb.ID() {
		t.Errorf("sandbox folders after the fork's removal: %v, want the source's only", ents)
	}
	if got := mustRun(t, sb, "cat ~/f"); got != "src\n" {
		t.Errorf("the source after the fork's removal: %q", got)
	}
}

// TestSnapshotRunning: a snapshot of a running sandbox leaves it running
// (a background process started before is alive), and a sandbox made of
// the snapshot has the source's changes to its root.
func TestSnapshotRunning(t *testing.T) {
	ctx := context.Background()
	state, _, sb := newImageSandbox(t)
	pid := spawnSleep(t, sb)
	mustRun(t, sb, "echo live > /usr/bin/livetool")
	if _, err := sb.CreateSnapshot(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if sb.Status() != sandbox.StatusRunning || run(t, sb, "kill -0 "+pid).ExitCode != 0 {
		t.Errorf("the source after its snapshot: status %s, its background process gone; want it running", sb.Status())
	}
	b := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Snapshot: "live"}})
	if got := mustRun(t, b, "cat /usr/bin/livetool"); got != "live\n" {
		t.Errorf("a sandbox of the live snapshot reads %q, want live", got)
	}
}
