//go:build linux

package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Untag takes one name off an image and keeps it under the others; the
// last name takes the image with it.
func TestUntag(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	layer, err := s.AddLayer(ctx, func(dir string) error { return os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644) })
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Save(ctx, &Image{Names: []string{"team/tools:1", "snap-one"}, Layers: []string{layer}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Untag(ctx, "snap-one"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, img.ID)
	if err != nil || !slices.Equal(got.Names, []string{"team/tools:1"}) {
		t.Fatalf("after untagging one name: %+v, %v; want the image under its other name", got, err)
	}
	if err := s.Untag(ctx, "snap-one"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("untagging a name no image has: %v, want ErrNotFound", err)
	}
	if err := s.Untag(ctx, img.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("untagging an id: %v, want ErrNotFound", err)
	}
	if err := s.Untag(ctx, "team/tools:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, img.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the image after its last name went: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(layer); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its layer: %v, want it removed", err)
	}
}
