package local

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// A sandbox created with an Image or a Snapshot has a writable root: an
// overlay whose lower layers are the image's (each ID-mapped onto the
// sandbox's host ids, so that the image's uid k is the sandbox's uid k)
// and whose upper and work folders are the sandbox's own, on its disk
// image when it has one (rootfsDir), so they persist across Stop and
// Start and the disk limit covers them. The host, as root, mounts the
// overlay detached (overlay_linux.go) and hands it to the init, which
// makes it the new root. The sandbox holds its image in the store
// (Store.Hold) from its creation until it is removed. A sandbox created
// with neither, by root, has a writable root made the same way of the
// host's system folders (hostroot_linux.go).

// DefaultCapabilities are the capabilities commands of a sandbox with a
// writable root (an Image, a Snapshot, or the host's folders as root)
// hold, within the sandbox's own
// user namespace: Docker's default set, so that package managers work as
// the sandbox's root (chown, setuid helpers, raw sockets for ping). They
// give no power over the host or over anything outside the sandbox's
// namespaces; the seccomp filter still applies. Other sandboxes' commands
// hold none (see [Confinement]).
func DefaultCapabilities() []string {
	names := make([]string, len(dockerCapabilities))
	for i, c := range dockerCapabilities {
		names[i] = c.name
	}
	return names
}

// dockerCapabilities is Docker's default capability set, with each
// capability's number (Linux's ABI, checked against x/sys/unix's in
// TestDockerCapabilityNumbers).
var dockerCapabilities = [...]struct {
	name  string
	value int
}{
	{"CAP_CHOWN", 0}, {"CAP_DAC_OVERRIDE", 1}, {"CAP_FSETID", 4}, {"CAP_FOWNER", 3},
	{"CAP_MKNOD", 27}, {"CAP_NET_RAW", 13}, {"CAP_SETGID", 6}, {"CAP_SETUID", 7},
	{"CAP_SETFCAP", 31}, {"CAP_SETPCAP", 8}, {"CAP_NET_BIND_SERVICE", 10},
	{"CAP_SYS_CHROOT", 18}, {"CAP_KILL", 5}, {"CAP_AUDIT_WRITE", 29},
}

// rootRecord is the image a sandbox's root is made of, as resolved when
// the sandbox was created (kept in its metadata).
type rootRecord struct {
	// Host: the root is made of the host's system folders (hostRoot), not
	// of an image; Image and Config are empty then.
	Host bool `json:"host,omitempty"`
	// Overlays are the host folders that have overlays of their own in a
	// root made of the host's folders (e.g. /usr), bound at their place.
	Overlays []string `json:"overlays,omitempty"`
	// OverlayLayers are, in a root made of a snapshot of a host root, the
	// snapshot's layers of each host folder of Overlays, over it.
	OverlayLayers map[string][]string `json:"overlayLayers,omitempty"`
	// Image is the image's (or snapshot's) ID in the store: "" for a root
	// made of the host's folders, unless made of a snapshot of one.
	Image string `json:"image"`
	// Layers are its layer folders, lowest first.
	Layers []string `json:"layers"`
	// Config is the image's configuration.
	Config image.Config `json:"config"`
}

// rootFS is the folder of a sandbox's data folder (its disk image's root,
// or its state folder) that holds the upper ("upper") and work ("work")
// folders of its writable root.
const rootFS = "rootfs"

// rootRef returns the store reference a sandbox shaped by c is created
// from ("" for the default root) and what it is, for messages.
func rootRef(c *Config) (ref, what string) {
	if c.Snapshot != "" {
		return c.Snapshot, "snapshot"
	}
	return c.Image, "image"
}

// resolveRoot resolves the image or snapshot of the new sandbox id shaped
// by c in the state dir's store and holds it for the sandbox; with
// neither, it returns the root made of the host's system folders
// (hostRoot), or nil where this process cannot make one (the host's
// folders, read-only). The caller releases it (releaseRoot) if the
// sandbox is not made after all.
func resolveRoot(ctx context.Context, stateDir, id string, c *Config) (*rootRecord, error) {
	ref, what := rootRef(c)
	if ref == "" {
		if c.ReadOnlyRoot {
			return nil, nil
		}
		return hostRoot(stateDir)
	}
	if !writableRootAvailable() {
		return nil, sandbox.NewOptionError(sandbox.ErrIsolationUnavailable, what, " ", ref, ": a sandbox's root made of an image is not writable without root: run as root, or leave ", sandbox.OptionImage, " and ", sandbox.OptionSnapshot, " empty")
	}
	st, err := openImages(stateDir)
	if err != nil {
		return nil, err
	}
	var img *image.Image
	if what == "snapshot" {
		img, err = st.Get(ctx, ref)
		if err == nil && img.Kind != image.KindSnapshot {
			err = fmt.Errorf("%w: %s is an image, not a snapshot: use Image", sandbox.ErrInvalidArgument, ref)
		}
	} else {
		img, err = st.Resolve(ctx, ref)
	}
	if err != nil {
		if errors.Is(err, image.ErrNotFound) {
			err = fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
		}
		return nil, fmt.Errorf("%s %s: %w", what, ref, err)
	}
	if img, err = st.Hold(id, img.ID); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, ref, err)
	}
	if len(img.HostOverlays) > 0 {
		return hostSnapshotRoot(img), nil
	}
	return &rootRecord{Image: img.ID, Layers: img.Layers, Config: img.Config}, nil
}

// releaseRoot lets go of the image the sandbox id of the state dir held,
// if any.
func releaseRoot(stateDir, id string, r *rootRecord) error {
	if r == nil || r.Image == "" {
		return nil
	}
	st, err := openImages(stateDir)
	if err != nil {
		return err
	}
	return st.Release(id)
}

// imageEnv returns env with the image's variables applied: each replaces
// the variable of that name.
func (r *rootRecord) imageEnv(env []string) []string {
	if r == nil {
		return env
	}
	out := make([]string, 0, len(env)+len(r.Config.Env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !hasVar(r.Config.Env, name) {
			out = append(out, kv)
		}
	}
	return append(out, r.Config.Env...)
}

// hasVar reports whether env sets the variable name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n == name {
			return true
		}
	}
	return false
}

// entrypoint returns the argv of the image's entrypoint session:
// Entrypoint then Cmd, as Docker runs them; nil for none.
func (r *rootRecord) entrypoint() []string {
	if r == nil {
		return nil
	}
	return append(append([]string(nil), r.Config.Entrypoint...), r.Config.Cmd...)
}

// workingDirectory returns the working directory of commands of the
// sandbox shaped by c: the image's WorkingDir when the sandbox keeps the
// default (its home).
func (r *rootRecord) workingDirectory(c *Config) string {
	if r != nil && r.Config.WorkingDir != "" && c.WorkingDirectory == c.home() {
		return r.Config.WorkingDir
	}
	return c.WorkingDirectory
}

// capabilities states, for Info, the capabilities commands of the sandbox
// hold when they run as u (nil: the sandbox's root).
func (r *rootRecord) capabilities(u *runAs) string {
	if r == nil || u != nil {
		return "none" // a user other than root holds none after exec
	}
	return strings.Join(DefaultCapabilities(), ",")
}
