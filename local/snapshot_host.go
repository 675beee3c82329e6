package local

import (
	"slices"

	"github.com/agentbox-dev/agentbox/local/image"
)

// hostSnapshotRoot returns the root record of a sandbox made of the
// snapshot img of a host root: the host's folders, each with its layers
// of img over it.
func hostSnapshotRoot(img *image.Image) *rootRecord {
	r := &rootRecord{Host: true, Image: img.ID, Config: img.Config, OverlayLayers: map[string][]string{}}
	end := len(img.Layers)
	for _, o := range slices.Backward(img.HostOverlays) {
		r.OverlayLayers[o.Path] = img.Layers[end-o.Layers : end]
		end -= o.Layers
	}
	for _, o := range img.HostOverlays {
		r.Overlays = append(r.Overlays, o.Path)
	}
	r.Layers = img.Layers[:end]
	return r
}
