package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"

	"golang.org/x/sys/unix"
)

// Store is a folder of images, snapshots and the layers they are made of:
//
//	DIR/lock                 taken while the records change
//	DIR/gc.lock              shared by pulls and AddLayer, exclusive for Prune
//	DIR/images/HEX.json      one record per image or snapshot
//	DIR/holds/HOLDER.json    the image a holder (a sandbox) uses
//	DIR/layers/HEX/          an unpacked layer, named by its tar digest
//	DIR/layers/HEX.json      its size
//	DIR/tmp/                 layers being unpacked, renamed into layers/ when whole
//
// Several Stores (in one process or several) may share a folder: every
// change is made under a lock file and moved into place by rename, so a
// reader never sees half a layer or half a record.
//
// The folder is private to its owner (mode 0700): layers keep the owners
// and modes the image gives its files, set-uid root programs included.
type Store struct {
	dir string
}

// Open opens the store in dir, creating the folder (mode 0700) when it
// does not exist. It refuses a folder that other users can reach.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("image store: empty folder path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("image store %s: not a folder", abs)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("image store %s is reachable by other users (mode %04o): its layers hold the images' set-uid files; run chmod 700 %s", abs, perm, abs)
	}
	for _, sub := range []string{"images", "holds", "layers", "tmp"} {
		if err := os.Mkdir(filepath.Join(abs, sub), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	return &Store{dir: abs}, nil
}

// Dir returns the store's folder.
func (s *Store) Dir() string { return s.dir }

// record is the stored form of an [Image]: layers by digest, so that the
// store's folder can move.
type record struct {
	ID      string     `json:"id"`
	Kind    Kind       `json:"kind"`
	Names   []string   `json:"names,omitempty"`
	Layers  []layerRef `json:"layers"`
	Config  Config     `json:"config"`
	Base    string     `json:"base,omitempty"`
	Created time.Time  `json:"created"`
	// HostOverlays are Image.HostOverlays.
	HostOverlays []HostOverlay `json:"hostOverlays,omitempty"`
}

// layerRef names a layer of the store by the digest of its tar stream.
type layerRef struct {
	Digest string `json:"digest"` // "sha256:…"
	Size   int64  `json:"size"`   // unpacked bytes
}

// layerMeta is the content of layers/HEX.json.
type layerMeta struct {
	Size int64 `json:"size"`
}

func (s *Store) lockPath() string   { return filepath.Join(s.dir, "lock") }
func (s *Store) gcLockPath() string { return filepath.Join(s.dir, "gc.lock") }
func (s *Store) recordPath(id string) string {
	return filepath.Join(s.dir, "images", hexOf(id)+".json")
}
func (s *Store) layerPath(digest string) string {
	return filepath.Join(s.dir, "layers", hexOf(digest))
}

// hexOf strips the "sha256:" of a digest.
func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// lock takes the store's record lock.
func (s *Store) lock(ctx context.Context) (*fileLock, error) {
	l, err := lockFile(ctx, s.lockPath(), unix.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	return l, nil
}

// image turns a record into the Image callers see.
func (s *Store) image(r *record) *Image {
	img := &Image{ID: r.ID, Kind: r.Kind, Names: slices.Clone(r.Names), Config: r.Config, Base: r.Base, Created: r.Created, HostOverlays: slices.Clone(r.HostOverlays)}
	img.Layers = make([]string, len(r.Layers))
	for i, l := range r.Layers {
		img.Layers[i] = s.layerPath(l.Digest)
		img.Size += l.Size
	}
	return img
}

// records reads every record of the store, sorted by creation time.
func (s *Store) records() ([]*record, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	var rs []*record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := readRecord(filepath.Join(s.dir, "images", e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	slices.SortStableFunc(rs, func(a, b *record) int { return a.Created.Compare(b.Created) })
	return rs, nil
}

func readRecord(path string) (*record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("image store: record %s is damaged: %w", path, err)
	}
	return &r, nil
}

// writeJSON writes v to path atomically.
func writeJSON(path string, v any) error { return atomicfile.WriteJSON(path, v) }

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// List returns every image and snapshot of the store, oldest first.
func (s *Store) List(ctx context.Context) ([]*Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs, err := s.records()
	if err != nil {
		return nil, err
	}
	imgs := make([]*Image, len(rs))
	for i, r := range rs {
		imgs[i] = s.image(r)
	}
	return imgs, nil
}

// Get finds an image or snapshot by name (as given to Pull or Save, in any
// spelling of the same reference: "alpine" is "docker.io/library/alpine:latest"),
// by ID ("sha256:…") or by a prefix of at least 4 hex digits of its ID.
// The error matches [ErrNotFound] when none does.
func (s *Store) Get(ctx context.Context, ref string) (*Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs, err := s.records()
	if err != nil {
		return nil, err
	}
	r, err := find(rs, ref)
	if err != nil {
		return nil, err
	}
	return s.image(r), nil
}

// find picks the record ref names among rs.
func find(rs []*record, ref string) (*record, error) {
	if ref == "" {
		return nil, fmt.Errorf("empty image reference: %w", ErrNotFound)
	}
	// The name as written first (a snapshot "alpine"), then as a reference
	// ("index.docker.io/library/alpine:latest").
	for _, want := range []string{ref, canonicalName(ref)} {
		for _, r := range rs {
			if slices.Contains(r.Names, want) {
				return r, nil
			}
		}
	}
	h := hexOf(ref)
	if len(h) < 4 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%q: %w", ref, ErrNotFound)
	}
	var hits []*record
	for _, r := range rs {
		if strings.HasPrefix(hexOf(r.ID), h) {
			hits = append(hits, r)
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("%q: %w", ref, ErrNotFound)
	case 1:
		return hits[0], nil
	}
	ids := make([]string, len(hits))
	for i, r := range hits {
		ids[i] = shortID(r.ID)
	}
	return nil, fmt.Errorf("%q is the start of several image ids (%s): give more of the id", ref, strings.Join(ids, ", "))
}

// shortID is the first 12 hex digits of an ID, as `agentbox image ls` shows it.
func shortID(id string) string {
	h := hexOf(id)
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// Resolve returns the image ref names in the store, pulling it first when
// there is none (see [Store.Pull] for what ref may be).
func (s *Store) Resolve(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	img, err := s.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return s.Pull(ctx, ref, o)
	}
	return img, err
}
