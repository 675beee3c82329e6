//go:build linux

package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

func TestOpenRefusesSharedFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	must(t, os.Mkdir(dir, 0o755))
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("Open of a 0755 folder: %v; want a refusal saying chmod 700", err)
	}
}

// fillSnapshot writes what a snapshot's upper dir holds: a file, a
// whiteout and an opaque folder.
func fillSnapshot(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("snap"), 0o644); err != nil {
		return err
	}
	if err := unix.Mknod(filepath.Join(dir, "gone"), unix.S_IFCHR, 0); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "opaque"), 0o755); err != nil {
		return err
	}
	if err := unix.Setxattr(filepath.Join(dir, "opaque"), opaqueXattr, []byte("y"), 0); err != nil {
		return err
	}
	// Fixed times, so that the same fill makes the same layer.
	ts := []unix.Timespec{{Sec: 1700000000}, {Sec: 1700000000}}
	for _, n := range []string{"marker", "gone", "opaque"} {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, n), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

func TestSnapshotLifecycle(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	r := newRegistry(t, "", "", nil)
	base := mustPull(t, s, r, r.push(t, "base/img:1", twoLayers(t)))

	layer, err := s.AddLayer(ctx, fillSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.AddLayer(ctx, fillSnapshot)
	if err != nil || again != layer {
		t.Fatalf("the same content again: %s, %v; want the same layer %s", again, err, layer)
	}
	wantFile(t, filepath.Join(layer, "marker"), "snap")
	if v, err := getxattr(filepath.Join(layer, "opaque"), opaqueXattr); err != nil || v != "y" {
		t.Errorf("opaque xattr = %q, %v", v, err)
	}

	_, err = s.Save(ctx, &Image{Kind: KindSnapshot, Names: []string{"snap0"}, Base: "no-such-base", Layers: []string{layer}})
	wantErr(t, err, ErrNotFound, "Save over a missing base")
	snap, err := s.Save(ctx, &Image{Kind: KindSnapshot, Names: []string{"snap1"}, Base: base.ID,
		Layers: append(slices.Clone(base.Layers), layer), Config: base.Config})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Kind != KindSnapshot || snap.Base != base.ID || len(snap.Layers) != 3 || snap.Size != base.Size+4 || !strings.HasPrefix(snap.ID, "sha256:") {
		t.Fatalf("saved %+v", snap)
	}
	if got, err := s.Get(ctx, "snap1"); err != nil || got.ID != snap.ID {
		t.Fatalf("Get(snap1) = %v, %v", got, err)
	}
	_, err = s.Save(ctx, &Image{Kind: KindSnapshot, Names: []string{"snap1"}, Layers: []string{layer}})
	wantErr(t, err, ErrExists, "Save under a taken name")
	_, err = s.Save(ctx, &Image{Names: []string{"snap1"}, Layers: []string{layer}})
	wantErr(t, err, ErrExists, "Save of an image under a snapshot's name")
	// An image saved under an older image's name takes it (a rebuild).
	v1, err := s.Save(ctx, &Image{Names: []string{"app:dev"}, Layers: []string{layer}})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.Save(ctx, &Image{Names: []string{"app:dev"}, Layers: append(slices.Clone(base.Layers), layer)})
	if err != nil {
		t.Fatalf("Save of a rebuild under its tag: %v", err)
	}
	if got, err := s.Get(ctx, "app:dev"); err != nil || got.ID != v2.ID || got.ID == v1.ID {
		t.Errorf("Get(app:dev) after the rebuild = %v, %v; want %s", got, err, v2.ID)
	}
	for _, id := range []string{v2.ID, v1.ID} {
		if err := s.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Save(ctx, &Image{Names: []string{"x"}, Layers: []string{"/etc"}}); err == nil {
		t.Error("Save of a folder outside the store succeeded")
	}

	// Held and based-on images cannot go.
	if _, err := s.Hold("sandbox-1", "snap1"); err != nil {
		t.Fatal(err)
	}
	err = s.Remove(ctx, "snap1")
	wantErr(t, err, ErrInUse, "Remove of a held snapshot")
	if !strings.Contains(err.Error(), "sandbox-1") {
		t.Errorf("the error does not name the holder: %v", err)
	}
	err = s.Remove(ctx, base.ID)
	wantErr(t, err, ErrInUse, "Remove of a snapshot's base")
	if !strings.Contains(err.Error(), "snap1") {
		t.Errorf("the error does not name the snapshot: %v", err)
	}
	if _, err := s.Hold("../x", "snap1"); err == nil {
		t.Error("Hold accepted a holder name with a slash")
	}
	must(t, s.Release("sandbox-1"))
	must(t, s.Release("sandbox-1")) // twice is no error
	must(t, s.Remove(ctx, "snap1"))
	if _, err := os.Stat(layer); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot's own layer is still there after Remove: %v", err)
	}
	for _, l := range base.Layers {
		if _, err := os.Stat(l); err != nil {
			t.Errorf("the base's layer went with the snapshot: %v", err)
		}
	}
	wantErr(t, s.Remove(ctx, "snap1"), ErrNotFound, "second Remove")
	must(t, s.Remove(ctx, base.ID))
	assertStoreEmpty(t, s)
}

func TestAddLayerFailuresLeaveNothing(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	_, err := s.AddLayer(ctx, func(dir string) error { return errors.New("copy failed") })
	if err == nil || !strings.Contains(err.Error(), "copy failed") {
		t.Fatalf("AddLayer with a failing fill: %v", err)
	}
	_, err = s.AddLayer(ctx, func(dir string) error {
		return unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	})
	if !errors.Is(err, errDevice) {
		t.Fatalf("AddLayer with a device node: %v; want it refused", err)
	}
	assertStoreEmpty(t, s)
}

func TestPruneAndRetag(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	r := newRegistry(t, "", "", nil)
	one := layerOf(t, layerTar(t, fileE("v", "1", 0o644, 0, 0)))
	two := layerOf(t, layerTar(t, fileE("v", "2", 0o644, 0, 0)))
	ref := r.push(t, "app:latest", imageOf(t, "", v1.Config{}, one))
	old := mustPull(t, s, r, ref)
	r.push(t, "app:latest", imageOf(t, "", v1.Config{}, two))
	cur := mustPull(t, s, r, ref)
	if cur.ID == old.ID {
		t.Fatal("the tag did not move")
	}
	got, err := s.Get(ctx, old.ID)
	if err != nil || len(got.Names) != 0 {
		t.Fatalf("the old image: %+v, %v; want it kept without a name", got, err)
	}
	// Leftovers of a crashed pull.
	must(t, os.MkdirAll(filepath.Join(s.Dir(), "tmp", "pull-crashed", "x"), 0o755))

	rep, err := s.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Images, []string{old.ID}) || len(rep.Layers) != 1 || rep.Bytes != 1 {
		t.Errorf("prune report %+v; want the old image and its 1-byte layer", rep)
	}
	if _, err := s.Get(ctx, ref); err != nil {
		t.Errorf("the current image went: %v", err)
	}
	wantFile(t, filepath.Join(cur.Layers[0], "v"), "2")
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp/ still holds %v", ents)
	}
	rep, err = s.Prune(ctx)
	if err != nil || len(rep.Images)+len(rep.Layers) != 0 {
		t.Errorf("second prune: %+v, %v; want nothing removed", rep, err)
	}
}

func TestResolve(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	r := newRegistry(t, "", "", nil)
	ref := r.push(t, "res/img:1", twoLayers(t))
	pulls := 0
	o := r.opts()
	o.Progress = func(p Progress) {
		if p.Layers > 0 && p.LayersDone == 0 && p.BytesDone == 0 {
			pulls++
		}
	}
	first, err := s.Resolve(ctx, ref, o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Resolve(ctx, ref, o)
	if err != nil || second.ID != first.ID {
		t.Fatalf("second Resolve: %v, %v", second, err)
	}
	if pulls != 1 {
		t.Errorf("%d pulls started; want 1 (the second Resolve finds the image in the store)", pulls)
	}
	_, err = s.Resolve(ctx, r.host+"/res/none:1", o)
	wantErr(t, err, ErrNotFound, "Resolve of an image the registry does not have")
}
