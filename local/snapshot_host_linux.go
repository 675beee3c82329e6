package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox-dev/agentbox/local/image"
)

// A snapshot of a sandbox whose root is made of the host's system folders
// (hostroot_linux.go) keeps that shape: its layers are its root's (a copy
// of the base layer, then the root's upper folder) followed by, for each
// host folder with an overlay of its own, that overlay's upper folder
// (image.Image.HostOverlays). A sandbox made of it (hostSnapshotRoot)
// gets the host's folders, each with its layers over it.

// hostSnapshotLayers copies the upper folders of the host root r, whose
// data folder is data (owners shifted from ids), into new layers of st,
// and returns the snapshot's layers and host overlays. The base layer of
// a host root (a folder of the state dir, pruned when no sandbox uses it)
// is copied into the store; the layers of a root made of such a snapshot
// are the store's already.
func hostSnapshotLayers(ctx context.Context, st imageStore, data string, r *rootRecord, ids *idRange) ([]string, []image.HostOverlay, error) {
	layers := slices.Clone(r.Layers)
	if r.Image == "" {
		base, err := st.AddLayer(ctx, func(layer string) error {
			t := &treeCopy{src: r.Layers[0], dst: layer, shift: keepID, xattr: snapshotXattr}
			return t.run()
		})
		if err != nil {
			return nil, nil, err
		}
		layers = []string{base}
	}
	top, err := upperLayer(ctx, st, data, ids)
	if err != nil {
		return nil, nil, err
	}
	layers = append(layers, top)
	var overlays []image.HostOverlay
	for _, d := range r.Overlays {
		own := slices.Clone(r.OverlayLayers[d])
		upper := filepath.Join(data, rootFS, "host", overlayName(d), "upper")
		if !emptyFolder(upper) {
			// An empty layer adds nothing (and overlayfs refuses it over
			// some host folders).
			l, err := layerOf(ctx, st, upper, ids)
			if err != nil {
				return nil, nil, err
			}
			own = append(own, l)
		}
		layers = append(layers, own...)
		overlays = append(overlays, image.HostOverlay{Path: d, Layers: len(own)})
	}
	return layers, overlays, nil
}

// snapshotPasswd reports whether a layer of the snapshot the root r is
// made of has an /etc/passwd: the source's, which named its user already.
func snapshotPasswd(r *rootRecord) bool {
	for _, l := range r.Layers[1:] {
		if _, err := os.Lstat(filepath.Join(l, "etc", "passwd")); err == nil {
			return true
		}
	}
	return false
}

// emptyFolder reports whether the folder dir is missing or empty.
func emptyFolder(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
