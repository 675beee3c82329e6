//go:build linux

package image_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/local/image"
)

// A sandbox resolves its image (pulling it the first time), holds it while
// it exists, and mounts its layers as the lower dirs of its root.
func Example() {
	ctx := context.Background()
	s, err := image.Open(filepath.Join(os.Getenv("HOME"), ".local/state/agentbox/images"))
	if err != nil {
		log.Fatal(err)
	}
	img, err := s.Resolve(ctx, "python:3.12-slim", image.PullOptions{
		Progress: func(p image.Progress) { fmt.Printf("\r%d/%d layers", p.LayersDone, p.Layers) },
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Hold("sandbox-1", img.ID); err != nil {
		log.Fatal(err)
	}
	defer s.Release("sandbox-1")
	fmt.Println(img.Layers, img.Config.Env)
}

// A snapshot is a new layer (what the sandbox changed) over its image's.
func ExampleStore_AddLayer() {
	ctx := context.Background()
	s, err := image.Open("/var/lib/agentbox/images")
	if err != nil {
		log.Fatal(err)
	}
	base, err := s.Get(ctx, "python:3.12-slim")
	if err != nil {
		log.Fatal(err)
	}
	layer, err := s.AddLayer(ctx, func(dir string) error {
		// Copy the sandbox's upper dir here, owners shifted back to the
		// image's ids, whiteouts and opaque folders kept.
		return os.WriteFile(filepath.Join(dir, "marker"), []byte("hello"), 0o644)
	})
	if err != nil {
		log.Fatal(err)
	}
	snap, err := s.Save(ctx, &image.Image{
		Kind:   image.KindSnapshot,
		Names:  []string{"my-snapshot"},
		Layers: append(base.Layers, layer),
		Config: base.Config,
		Base:   base.ID,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(snap.ID)
}
