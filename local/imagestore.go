package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// imagesDir is the image store's folder in the state dir.
const imagesDir = "images"

// imageStore is what the engine uses of the image store: the methods of
// package image's Store, with its pull options left at their defaults.
type imageStore interface {
	// Resolve returns the image ref names, pulling it when the store
	// lacks it.
	Resolve(ctx context.Context, ref string) (*image.Image, error)
	Get(ctx context.Context, ref string) (*image.Image, error)
	List(ctx context.Context) ([]*image.Image, error)
	Remove(ctx context.Context, ref string) error
	AddLayer(ctx context.Context, fill func(dir string) error) (string, error)
	Save(ctx context.Context, img *image.Image) (*image.Image, error)
	Hold(holder, ref string) (*image.Image, error)
	Release(holder string) error
}

// openImages opens the image store of stateDir (its folder imagesDir).
func openImages(stateDir string) (imageStore, error) {
	s, err := image.Open(filepath.Join(stateDir, imagesDir))
	if err != nil {
		return nil, err
	}
	// The default pull options: credentials from ~/.docker/config.json
	// and its helpers, this machine's platform.
	return pullingStore{s, image.PullOptions{}}, nil
}

// pullingStore is an image store whose Resolve pulls with fixed options
// (an imageStore, and a build.Store).
type pullingStore struct {
	*image.Store
	pull image.PullOptions
}

// Resolve returns the image ref names, pulling it when the store lacks it.
func (s pullingStore) Resolve(ctx context.Context, ref string) (*image.Image, error) {
	return s.Store.Resolve(ctx, ref, s.pull)
}

// OpenImageStore opens the image store of stateDir ("" is
// DefaultStateDir): the images and snapshots sandboxes of the state dir
// are made of (Config.Image, Config.Snapshot).
func OpenImageStore(stateDir string) (*image.Store, error) {
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	return image.Open(filepath.Join(stateDir, imagesDir))
}

// LookupImage returns the image or snapshot ref (a name, an id or an id
// prefix) of the image store of stateDir ("" is DefaultStateDir), without
// pulling it. It fails with an error matching both sandbox.ErrNotFound
// and image.ErrNotFound when the store has none.
func LookupImage(ctx context.Context, stateDir, ref string) (*image.Image, error) {
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	st, err := openImages(stateDir)
	if err != nil {
		return nil, err
	}
	img, err := st.Get(ctx, ref)
	if errors.Is(err, image.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	return img, err
}
