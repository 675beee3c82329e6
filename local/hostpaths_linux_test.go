//go:build linux

package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Tests that what a sandbox plants in its own files (links to host paths,
// FIFOs) never leads the host's root code at start anywhere outside the
// sandbox, nor makes it wait.

// inUpper calls f with the upper folder of the writable root of the
// stopped sandbox sb, as its commands left it.
func inUpper(t *testing.T, sb *local.Sandbox, f func(upper string)) {
	t.Helper()
	must(t, local.InData(sb, func(data string) error {
		f(filepath.Join(data, "rootfs", "upper"))
		return nil
	}))
}

// TestHostRootPasswdNotThroughLink: a sandbox whose /etc became a link to
// a host folder (as `rm -rf /etc; ln -s /host/dir /etc` leaves it in its
// upper folder) starts again without the host writing its passwd there.
func TestHostRootPasswdNotThroughLink(t *testing.T) {
	needHostRoot(t)
	ctx := context.Background()
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	if got := mustRun(t, sb, "id -un"); got != "agent\n" {
		t.Fatalf("id -un: %q", got)
	}
	must(t, sb.Stop(ctx))
	marker := t.TempDir() // a host folder
	inUpper(t, sb, func(upper string) {
		etc := filepath.Join(upper, "etc")
		must(t, os.RemoveAll(etc))
		must(t, os.Symlink(marker, etc))
	})

	_, err := sb.Start(ctx)
	if names, _ := os.ReadDir(marker); len(names) > 0 {
		t.Errorf("the host wrote %s into the host folder the sandbox's /etc links to", names[0].Name())
	}
	if err != nil {
		t.Fatalf("start after /etc became a link: %v", err)
	}
	if got := mustRun(t, sb, "echo ok"); got != "ok\n" {
		t.Errorf("a command: %q", got)
	}
}

// TestImageUserFIFO: an image sandbox with a USER whose /etc/passwd became
// a FIFO fails to start with a clear error; the host does not wait on it.
func TestImageUserFIFO(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := newStateDir(t)
	sb := newSandbox(t, local.Options{StateDir: state, Config: local.Config{Image: userImage(t, state, "node")}})
	must(t, sb.Stop(ctx))
	inUpper(t, sb, func(upper string) {
		etc := filepath.Join(upper, "etc")
		must(t, os.MkdirAll(etc, 0o755))
		must(t, syscall.Mkfifo(filepath.Join(etc, "passwd"), 0o644))
	})

	done := make(chan error, 1)
	go func() {
		_, err := sb.Start(ctx)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // a bound for a hang, not a timing
		// Nothing can end the wait (the FIFO is on the sandbox's disk
		// image, mounted by the waiting Start): end the test binary.
		panic("Start waits on the FIFO the sandbox made its /etc/passwd")
	}
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("start with a FIFO as /etc/passwd: %v, want an error saying it is not a regular file", err)
	}
	// Gone again, the sandbox starts.
	inUpper(t, sb, func(upper string) { must(t, os.Remove(filepath.Join(upper, "etc", "passwd"))) })
	if _, err := sb.Start(ctx); err != nil {
		t.Fatalf("start once /etc/passwd is gone again: %v", err)
	}
	if got := mustRun(t, sb, "id -u"); got != "1000\n" {
		t.Errorf("id -u: %q", got)
	}
}

// TestImageMountPointNotThroughLink: a volume whose mount path goes
// through a link of the image's root naming a host folder is bound inside
// the sandbox's root (where the link leads in the sandbox), never in the
// host folder, which the sandbox's ids could write; so are /dev and
// /proc when the image makes them links to host folders.
func TestImageMountPointNotThroughLink(t *testing.T) {
	needImages(t)
	ctx := context.Background()
	state := newStateDir(t)
	// A host folder every user may write, outside /tmp (the init's new
	// root covers the host's /tmp).
	marker, err := os.MkdirTemp("/var/tmp", "agentbox-marker-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(marker) })
	must(t, os.Chmod(marker, 0o777))
	root := testRootfs(t)
	must(t, os.Symlink(marker, filepath.Join(root, "mnt")))
	for _, d := range []string{"dev", "proc"} {
		must(t, os.RemoveAll(filepath.Join(root, d)))
		must(t, os.Symlink(filepath.Join(marker, d), filepath.Join(root, d)))
	}
	if _, err := local.SaveImage(ctx, state, &image.Image{Kind: image.KindImage, Names: []string{"test/mntlink:1"}, Layers: []string{root}}); err != nil {
		t.Fatal(err)
	}
	sb := openSandbox(t, local.Options{StateDir: state, Config: local.Config{
		Image:            "test/mntlink:1",
		Volumes:          []local.Volume{{Name: "vol", MountPath: "/mnt/vol"}},
		WorkingDirectory: "/mnt/work",
	}})
	_, err = sb.Start(ctx)
	if names, _ := os.ReadDir(marker); len(names) > 0 {
		t.Errorf("the sandbox's start made %s in the host folder its image's /mnt links to", names[0].Name())
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	mustRun(t, sb, "echo hi > /mnt/vol/x && pwd > /mnt/work/wd")
	// /dev and /proc, links in the image, lead to the sandbox's own.
	if got := mustRun(t, sb, "test -c /dev/null && test -d /proc/self/fd && echo ok"); got != "ok\n" {
		t.Errorf("/dev and /proc through the image's links: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(state, "volumes", "vol", "x")); err != nil || string(b) != "hi\n" {
		t.Errorf("the volume's file: %q, %v", b, err)
	}
}

// TestSnapshotKeepsHoles: a snapshot of a sandbox holding a sparse file
// (a few bytes of data) copies only its data: the layer's copy stays
// sparse, with the same size and bytes. The size is 1 GiB: the store's
// digest of the layer reads its holes (TestCopyShiftedKeepsHoles copies
// 64 GiB).
func TestSnapshotKeepsHoles(t *testing.T) {
	ctx := context.Background()
	_, _, sb := newImageSandbox(t)
	const size = 1 << 30
	// The image has no dd: the file is made in the stopped sandbox's
	// upper folder, as a command would have left it.
	must(t, sb.Stop(ctx))
	inUpper(t, sb, func(upper string) {
		must(t, os.MkdirAll(filepath.Join(upper, "opt"), 0o755))
		f, err := os.Create(filepath.Join(upper, "opt/big"))
		must(t, err)
		_, err = f.WriteAt([]byte("head"), 0)
		must(t, err)
		_, err = f.WriteAt([]byte("tail"), size-4)
		must(t, err)
		must(t, f.Close())
	})
	snap, err := sb.CreateSnapshot(ctx, "sparse")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(snap.Layers[len(snap.Layers)-1], "opt/big")
	var st syscall.Stat_t
	must(t, syscall.Stat(p, &st))
	if st.Size != size || st.Blocks*512 > 1<<20 {
		t.Errorf("the layer's copy: %d bytes, %d allocated; want %d bytes, at most 1 MiB allocated", st.Size, st.Blocks*512, int64(size))
	}
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	buf := make([]byte, 4)
	for off, want := range map[int64]string{0: "head", size - 4: "tail", size / 2: "\x00\x00\x00\x00"} {
		if _, err := f.ReadAt(buf, off); err != nil || string(buf) != want {
			t.Errorf("the copy's bytes at %d: %q (%v), want %q", off, buf, err, want)
		}
	}
}

// TestDiskBudget: the disk images of a state dir's sandboxes, at their
// full sizes, stay within Options.DiskBudgetMB: a create beyond it fails
// naming the sizes, with nothing made (no folder, no host id range); a
// default disk shrinks to what is left.
func TestDiskBudget(t *testing.T) {
	testenv.NeedRoot(t, "disk limits need root")
	ctx := context.Background()
	state := newStateDir(t)
	opts := func(id string, diskMB int64) local.Options {
		return local.Options{ID: id, StateDir: state, DiskBudgetMB: 200, Config: local.Config{Resources: local.Resources{DiskMiB: diskMB}}}
	}
	newSandbox(t, opts("a", 128))
	_, err := local.New(opts("b", 128))
	if !errors.Is(err, local.ErrDiskBudget) || !errors.Is(err, sandbox.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "128 MiB (Resources.DiskMiB)") || !strings.Contains(err.Error(), "already take 128 MiB") || !strings.Contains(err.Error(), "budget of 200 MiB") {
		t.Fatalf("a create beyond the budget: %v, want ErrDiskBudget naming the sizes", err)
	}
	if _, err := os.Stat(filepath.Join(state, "sandboxes", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused sandbox's folder: %v, want none", err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "hostids.json")); strings.Contains(string(b), `"b"`) {
		t.Errorf("the refused sandbox holds a host id range: %s", b)
	}
	// A default disk takes what is left: 72 MiB, so 64.
	c := newSandbox(t, opts("c", 0))
	info, err := c.Info(ctx)
	must(t, err)
	if info.Limits == nil || info.Limits.DiskMB != 64 {
		t.Errorf("the default disk with 72 MiB left: %+v, want 64 MiB", info.Limits)
	}
	if _, err := local.New(opts("d", 0)); !errors.Is(err, local.ErrDiskBudget) || !strings.Contains(err.Error(), "smallest default") {
		t.Errorf("a default disk with 8 MiB left: %v, want ErrDiskBudget", err)
	}
	// Two handles made before either started: the second start finds
	// the budget taken.
	state = newStateDir(t)
	x, y := openSandbox(t, opts("x", 128)), openSandbox(t, opts("y", 128))
	if _, err := x.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Start(ctx); !errors.Is(err, local.ErrDiskBudget) {
		t.Errorf("starting the second of two sandboxes beyond the budget: %v, want ErrDiskBudget", err)
	}
}
