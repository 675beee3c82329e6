// Package image keeps the local engine's images: OCI images pulled from a
// registry, read from an OCI layout or a `docker save` tarball, or taken
// from a rootfs folder, unpacked once into a content-addressed layer store
// that every sandbox using them shares read-only; and the snapshots and
// builds made from sandboxes, stored the same way.
//
// A [Store] lives in one folder of the local engine's state dir. An
// [Image] is what a sandbox's root is made of: its layers (folders in
// overlayfs format, lowest first, owned by the ids the image gives them)
// and its configuration.
package image

import (
	"errors"
	"time"
)

// Errors of the store, matched with errors.Is.
var (
	// ErrNotFound: no image or snapshot has that name or id.
	ErrNotFound = errors.New("image not found")
	// ErrExists: a name is taken.
	ErrExists = errors.New("image name already exists")
	// ErrInUse: a sandbox (or a snapshot built on it) still uses the image.
	ErrInUse = errors.New("image in use")
	// ErrUnauthorized: the registry refused the credentials (or asked for
	// some and none were found).
	ErrUnauthorized = errors.New("registry refused the credentials")
	// ErrPlatform: the image has no variant for the platform asked for.
	ErrPlatform = errors.New("image is not available for the platform")
	// ErrCorrupt: content does not match its digest, or a layer is not a
	// valid or safe tar stream.
	ErrCorrupt = errors.New("image content is corrupt")
	// ErrNoSpace: unpacking a layer would leave the store's disk all but
	// full (a layer far larger unpacked than its blob, or a full disk).
	ErrNoSpace = errors.New("not enough free disk space to unpack the image")
	// ErrNotRegistry: PullOptions.RegistryOnly refused a host path, an
	// oci: layout or a tarball.
	ErrNotRegistry = errors.New("only registry references are allowed here, not files or folders of the host")
)

// Kind tells images from snapshots.
type Kind string

// Kinds of [Image].
const (
	KindImage    Kind = "image"    // pulled, imported or built
	KindSnapshot Kind = "snapshot" // a sandbox's frozen writable layer over its base
)

// Image is an image or snapshot of the store.
type Image struct {
	// ID is the image's content address ("sha256:…").
	ID string `json:"id"`
	// Kind is KindImage or KindSnapshot.
	Kind Kind `json:"kind"`
	// Names are the references it was pulled, tagged or built as (for a
	// snapshot, its snapshot name).
	Names []string `json:"names,omitempty"`
	// Layers are absolute paths of the unpacked layer folders, lowest
	// first: overlayfs lower dirs (whiteouts as 0/0 character devices,
	// opaque folders with the trusted.overlay.opaque xattr), owned by the
	// uids and gids the image gives them, never to be written.
	Layers []string `json:"layers"`
	// Config is what the image says about running it.
	Config Config `json:"config"`
	// Base is the ID of the image a snapshot was taken over ("" for one
	// taken over the default root).
	Base string `json:"base,omitempty"`
	// HostOverlays, in a snapshot of a sandbox whose root is made of the
	// host's system folders, are the host folders with overlays of their
	// own: each has the next Layers of the end of Layers, in this order,
	// over the host's folder; the layers before them are the root's.
	HostOverlays []HostOverlay `json:"hostOverlays,omitempty"`
	// Size is the unpacked size in bytes of its layers.
	Size int64 `json:"size"`
	// Created is when the store recorded it.
	Created time.Time `json:"created"`
}

// HostOverlay is a host folder of a snapshot of a host root, and how many
// of the snapshot's layers are its (see Image.HostOverlays).
type HostOverlay struct {
	Path   string `json:"path"`
	Layers int    `json:"layers"`
}

// Config is the part of an OCI image configuration a sandbox applies.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}
