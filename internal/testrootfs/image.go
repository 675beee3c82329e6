package testrootfs

import (
	"context"
	"testing"

	"github.com/agentbox-dev/agentbox/local/image"
)

// SaveImage makes a root file system (Make), imports it into the image
// store st and names the image name.
func SaveImage(t testing.TB, st *image.Store, name string) *image.Image {
	t.Helper()
	ctx := context.Background()
	img, err := st.Pull(ctx, Make(t), image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named, err := st.Save(ctx, &image.Image{Names: []string{name}, Layers: img.Layers, Config: img.Config})
	if err != nil {
		t.Fatal(err)
	}
	return named
}
