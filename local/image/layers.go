package image

import (
	"context"
	"crypto/sha256"
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

	"golang.org/x/sys/unix"
)

// layerSize returns the size of layer digest when the store has it whole.
func (s *Store) layerSize(digest string) (int64, bool) {
	b, err := os.ReadFile(s.layerPath(digest) + ".json")
	if err != nil {
		return 0, false
	}
	var m layerMeta
	if json.Unmarshal(b, &m) != nil {
		return 0, false
	}
	if fi, err := os.Lstat(s.layerPath(digest)); err != nil || !fi.IsDir() {
		return 0, false
	}
	return m.Size, true
}

// computeID is the content address of a record made in the store (not
// pulled): the digest of its kind, layers, configuration, base and host
// overlays.
func computeID(r *record) string {
	digests := make([]string, len(r.Layers))
	for i, l := range r.Layers {
		digests[i] = l.Digest
	}
	b, _ := json.Marshal(struct {
		Kind   Kind          `json:"kind"`
		Layers []string      `json:"layers"`
		Config Config        `json:"config"`
		Base   string        `json:"base,omitempty"`
		Host   []HostOverlay `json:"hostOverlays,omitempty"`
	}{r.Kind, digests, r.Config, r.Base, r.HostOverlays})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// commit moves staged layers into layers/ (keeping a copy already there)
// and records rec, under the store's lock. With takeNames, rec's names are
// taken from any other image that had them (a pull of a tag that moved, a
// rebuild); without, a name taken by another image is an ErrExists error,
// and so is, always, a snapshot's name.
func (s *Store) commit(ctx context.Context, staged []stagedLayer, rec *record, takeNames bool) (*Image, error) {
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	for _, st := range staged {
		dst := s.layerPath(st.ref.Digest)
		err := os.Rename(st.path, dst)
		if err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.ENOTEMPTY) {
			return nil, fmt.Errorf("image store: %w", err)
		}
		if _, ok := s.layerSize(st.ref.Digest); !ok {
			if err := writeJSON(dst+".json", layerMeta{Size: st.ref.Size}); err != nil {
				return nil, fmt.Errorf("image store: %w", err)
			}
		}
	}
	for _, lr := range rec.Layers {
		if _, ok := s.layerSize(lr.Digest); !ok {
			return nil, fmt.Errorf("image store: layer %s is gone (removed by a concurrent prune?): make the image again", lr.Digest)
		}
	}
	rs, err := s.records()
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.ID == rec.ID {
			rec.Created = r.Created
			rec.Names = mergeNames(r.Names, rec.Names)
			continue
		}
		taken := slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return !slices.Contains(rec.Names, n) })
		if len(taken) == 0 {
			continue
		}
		if !takeNames || r.Kind == KindSnapshot {
			return nil, fmt.Errorf("name %q is taken by %s %s: %w", taken[0], r.Kind, shortID(r.ID), ErrExists)
		}
		r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return slices.Contains(rec.Names, n) })
		if err := writeJSON(s.recordPath(r.ID), r); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	if err := writeJSON(s.recordPath(rec.ID), rec); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return s.image(rec), nil
}

// mergeNames appends the names of b missing from a.
func mergeNames(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// AddLayer makes a new layer: fill writes its content, in overlayfs
// format (whiteouts as 0/0 character devices, opaque folders marked with
// the trusted.overlay.opaque xattr, owners as the image sees them), into
// the empty folder it is given. The layer is then named by the digest of
// its tar stream (an identical layer already in the store is kept instead)
// and returned as the absolute path of its folder, never to be written
// again, for an [Image.Layers] given to [Store.Save]. A device node other
// than a whiteout is refused. Nothing is left behind on failure.
//
// Until Save records an image using it, the layer is not referenced:
// Save fails if a Prune running in between removed it.
func (s *Store) AddLayer(ctx context.Context, fill func(dir string) error) (string, error) {
	gc, err := lockFile(ctx, s.gcLockPath(), unix.LOCK_SH)
	if err != nil {
		return "", err
	}
	defer gc.unlock()
	staging, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "add-")
	if err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	defer os.RemoveAll(staging)
	dir := filepath.Join(staging, "layer")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	if err := fill(dir); err != nil {
		return "", fmt.Errorf("add layer: %w", err)
	}
	h := sha256.New()
	size, err := writeTar(ctx, dir, h, true)
	if err != nil {
		return "", fmt.Errorf("add layer: %w", err)
	}
	ref := layerRef{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: size}
	l, err := s.lock(ctx)
	if err != nil {
		return "", err
	}
	defer l.unlock()
	err = os.Rename(dir, s.layerPath(ref.Digest))
	if err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.ENOTEMPTY) {
		return "", fmt.Errorf("image store: %w", err)
	}
	if _, ok := s.layerSize(ref.Digest); !ok {
		if err := writeJSON(s.layerPath(ref.Digest)+".json", layerMeta{Size: ref.Size}); err != nil {
			return "", fmt.Errorf("image store: %w", err)
		}
	}
	return s.layerPath(ref.Digest), nil
}

// Save records an image or snapshot made of layers of the store (paths
// returned by AddLayer or found in another image's Layers): img's Kind
// ("" is KindImage), Names (at least one), Layers, Config and Base (an image of the store, by
// name or id, resolved to its ID; ErrNotFound when there is none). The ID,
// Size and Created of img are ignored: Save computes them. Saving the
// same content again under a new name adds the name. An image takes its
// names from older images that had them (a rebuild moves its tag, as
// docker build does); a snapshot never does, and no image takes a
// snapshot's name: a name taken that way is an ErrExists error.
func (s *Store) Save(ctx context.Context, img *Image) (*Image, error) {
	rec := &record{Kind: img.Kind, Names: slices.Clone(img.Names), Config: img.Config, Created: time.Now().UTC(), HostOverlays: slices.Clone(img.HostOverlays)}
	if rec.Kind == "" {
		rec.Kind = KindImage
	}
	if rec.Kind != KindImage && rec.Kind != KindSnapshot {
		return nil, fmt.Errorf("save image: unknown kind %q", rec.Kind)
	}
	if len(rec.Names) == 0 {
		return nil, errors.New("save image: give it a name")
	}
	for _, n := range rec.Names {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("save image: %w", err)
		}
	}
	layersDir := filepath.Join(s.dir, "layers") + string(filepath.Separator)
	for _, p := range img.Layers {
		h, ok := strings.CutPrefix(filepath.Clean(p), layersDir)
		if !ok || strings.Contains(h, string(filepath.Separator)) {
			return nil, fmt.Errorf("save image: %s is not a layer of the store %s (make it with AddLayer)", p, s.dir)
		}
		rec.Layers = append(rec.Layers, layerRef{Digest: "sha256:" + h})
	}
	for i, lr := range rec.Layers {
		size, ok := s.layerSize(lr.Digest)
		if !ok {
			return nil, fmt.Errorf("save image: layer %s is not in the store (removed by a prune?)", img.Layers[i])
		}
		rec.Layers[i].Size = size
	}
	if img.Base != "" {
		base, err := s.Get(ctx, img.Base)
		if err != nil {
			return nil, fmt.Errorf("save image: base: %w", err)
		}
		rec.Base = base.ID
	}
	rec.ID = computeID(rec)
	return s.commit(ctx, nil, rec, rec.Kind == KindImage)
}

// checkName refuses names that cannot be told from ids or break listings.
func checkName(n string) error {
	switch {
	case n == "":
		return errors.New("empty name")
	case strings.HasPrefix(n, "sha256:"):
		return fmt.Errorf("name %q: a name cannot start with sha256: (ids do)", n)
	case strings.IndexFunc(n, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("name %q: no spaces or control characters", n)
	}
	return nil
}
