package local

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Snapshots lists the snapshots of the state dir's image store.
func Snapshots(ctx context.Context, stateDir string) ([]*image.Image, error) {
	st, err := openImages(stateDir)
	if err != nil {
		return nil, err
	}
	all, err := st.List(ctx)
	return slices.DeleteFunc(all, func(img *image.Image) bool { return img.Kind != image.KindSnapshot }), err
}

// RemoveSnapshot removes the snapshot name from the state dir's image
// store. It fails with an error matching image.ErrInUse while a sandbox
// (or another snapshot) uses it, and image.ErrNotFound when there is no
// such snapshot.
func RemoveSnapshot(ctx context.Context, stateDir, name string) error {
	st, err := openImages(stateDir)
	if err != nil {
		return err
	}
	img, err := st.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", name, err)
	}
	if img.Kind != image.KindSnapshot {
		return fmt.Errorf("%w: %s is an image, not a snapshot", sandbox.ErrInvalidArgument, name)
	}
	return st.Remove(ctx, img.ID)
}
