//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// imageOSRelease is the /etc/os-release of the test images.
const imageOSRelease = testrootfs.OSRelease

// testRootfs makes a small root file system folder (testrootfs.Make).
func testRootfs(t testing.TB) string { return testrootfs.Make(t) }

// newImageSandbox starts a sandbox made of a testRootfs image in a new
// state dir.
func newImageSandbox(t *testing.T) (stateDir, rootfs string, sb *local.Sandbox) {
	t.Helper()
	needImages(t)
	stateDir, rootfs = t.TempDir(), testRootfs(t)
	return stateDir, rootfs, newSandbox(t, local.Options{StateDir: stateDir, Config: local.Config{Image: rootfs}})
}

// needImages skips (or fails, in CI) a test of images, which need root.
func needImages(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: a root made of an image is an overlay the host mounts, with ID-mapped layers")
}

// TestImageRoot: a sandbox made of an image sees the image's files, not
// the host's (links in the image naming host paths included); it writes
// into its /usr as its root, with Docker's capabilities, and the write
// persists across stop and start without reaching the image or another
// sandbox made of it.
func TestImageRoot(t *testing.T) {
	ctx := context.Background()
	state, rootfs, sb := newImageSandbox(t)

	if got := mustRun(t, sb, "cat /etc/os-release"); got != imageOSRelease {
		t.Fatalf("/etc/os-release = %q, want the image's", got)
	}
	for _, l := range []string{"/etc/hostlink", "/etc/rellink"} {
		if got := mustRun(t, sb, "cat "+l); got != imageOSRelease {
			t.Errorf("%s (a link to a host path in the image) reads %q, want the image's os-release", l, got)
		}
	}
	mustRun(t, sb, "echo installed > /usr/bin/newtool && touch /usr/share/owned && chown 1000:1000 /usr/share/owned && rm /usr/share/marker")
	if got := mustRun(t, sb, "stat -c %u:%g /usr/share/owned"); got != "1000:1000\n" {
		t.Errorf("chown as the sandbox's root: owner %q, want 1000:1000", got)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Identity.Capabilities, "CAP_CHOWN") || info.Metadata["image"] != rootfs {
		t.Errorf("Info: capabilities %q, image %q; want Docker's set and %s", info.Identity.Capabilities, info.Metadata["image"], rootfs)
	}

	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, sb, "cat /usr/bin/newtool; ls /usr/share"); got != "installed\nowned\n" {
		t.Errorf("after stop and start: %q, want the sandbox's changes kept", got)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "usr/bin/newtool")); err == nil {
		t.Error("the sandbox's write reached the image's folder")
	}
	if _, err := os.Stat(filepath.Join(rootfs, "usr/share/marker")); err != nil {
		t.Errorf("the sandbox's deletion reached the image's folder: %v", err)
	}
	other := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: rootfs}})
	if got := mustRun(t, other, "cat /usr/share/marker; ls /usr/bin/newtool 2>&1 || true"); !strings.HasPrefix(got, "image\n") || strings.Contains(got, "newtool\n") && !strings.Contains(got, "No such") {
		t.Errorf("another sandbox of the image sees %q, want the image as it is", got)
	}
}

// TestImageConfig: the image's Env, WorkingDir and Entrypoint/Cmd apply.
func TestImageConfig(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	img, err := local.SaveImage(ctx, state, &image.Image{
		Kind: image.KindImage, Names: []string{"test/config:1"}, Layers: []string{testRootfs(t)},
		Config: image.Config{
			Env: []string{"IMAGE_VAR=from-image", "PATH=/usr/bin:/bin"}, WorkingDir: "/srv/app",
			Entrypoint: []string{"sh", "-c"}, Cmd: []string{"echo entry > /srv/app/entry.txt; exec sleep 1000"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: img.Names[0]}})
	if got := mustRun(t, sb, "echo $IMAGE_VAR $PATH; pwd"); got != "from-image /usr/bin:/bin\n/srv/app\n" {
		t.Errorf("env and working dir: %q", got)
	}
	if !poll(10e9, func() bool { return run(t, sb, "cat /srv/app/entry.txt").Stdout == "entry\n" }) {
		t.Error("the image's entrypoint did not run")
	}
}

// TestSnapshot: a snapshot of a sandbox holds its changes to the root
// (files, deletions, owners); a new sandbox made of it sees them; the
// snapshot cannot be removed while that sandbox exists, nor its name
// taken again.
func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	state, _, a := newImageSandbox(t)
	mustRun(t, a, "mkdir -p /opt/tool && echo v1 > /opt/tool/version && chown -R 1000:1000 /opt/tool && rm /usr/share/marker && echo home > ~/notroot && ln -s /etc/shadow /etc/evil")
	snap, err := a.CreateSnapshot(ctx, "snap1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Kind != image.KindSnapshot || snap.Base == "" {
		t.Errorf("snapshot %+v: want kind snapshot over the image", snap)
	}
	// The snapshot's layer keeps the sandbox's link as a link: freezing
	// never follows it to the host's file.
	if target, err := os.Readlink(filepath.Join(snap.Layers[len(snap.Layers)-1], "etc/evil")); err != nil || target != "/etc/shadow" {
		t.Errorf("the snapshot's etc/evil: link to %q (%v), want the link to /etc/shadow kept as it is", target, err)
	}
	if _, err := a.CreateSnapshot(ctx, "snap1"); !errors.Is(err, image.ErrExists) {
		t.Errorf("second snapshot of the same name: %v, want ErrExists", err)
	}
	b := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Snapshot: "snap1"}})
	if got := mustRun(t, b, "cat /opt/tool/version; stat -c %u /opt/tool/version; ls /usr/share; ls ~; cat /etc/evil 2>/dev/null || true"); got != "v1\n1000\n" {
		t.Errorf("sandbox from the snapshot: %q, want its file (owner 1000), the deletion, and a fresh home", got)
	}
	if err := local.RemoveSnapshot(ctx, state, "snap1"); !errors.Is(err, image.ErrInUse) {
		t.Errorf("removing a snapshot in use: %v, want ErrInUse", err)
	}
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := local.RemoveSnapshot(ctx, state, "snap1"); err != nil {
		t.Errorf("removing the snapshot no sandbox uses: %v", err)
	}
}

// TestImageUnknown: a sandbox of an image the store cannot find is not
// created, and leaves nothing behind.
func TestImageUnknown(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := t.TempDir()
	for _, c := range []local.Config{{Image: "/no/such/rootfs"}, {Snapshot: "nosuchsnapshot"}} {
		sb, err := local.New(local.Options{StateDir: state, Config: c})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Start(ctx); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%+v: start: %v, want an error matching sandbox.ErrNotFound", c, err)
		}
		if infos, err := local.List(ctx, state); err != nil || len(infos) != 0 {
			t.Errorf("%+v: sandboxes left: %v (%v)", c, infos, err)
		}
	}
}
