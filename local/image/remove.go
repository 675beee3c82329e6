package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// hold is the content of holds/HOLDER.json.
type hold struct {
	ID string `json:"id"`
}

// Hold records that holder (a sandbox id) uses the image ref names, until
// [Store.Release]: Remove refuses to remove it meanwhile. A holder holds
// one image; holding another replaces it.
func (s *Store) Hold(holder, ref string) (*Image, error) {
	if err := checkHolder(holder); err != nil {
		return nil, err
	}
	ctx := context.Background()
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	rs, err := s.records()
	if err != nil {
		return nil, err
	}
	r, err := find(rs, ref)
	if err != nil {
		return nil, err
	}
	if err := writeJSON(s.holdPath(holder), hold{ID: r.ID}); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return s.image(r), nil
}

// Release ends holder's hold; releasing a holder that holds nothing is no
// error.
func (s *Store) Release(holder string) error {
	if err := checkHolder(holder); err != nil {
		return err
	}
	l, err := s.lock(context.Background())
	if err != nil {
		return err
	}
	defer l.unlock()
	if err := os.Remove(s.holdPath(holder)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image store: %w", err)
	}
	return nil
}

func (s *Store) holdPath(holder string) string {
	return filepath.Join(s.dir, "holds", holder+".json")
}

// checkHolder accepts holder names that are safe file names.
func checkHolder(h string) error {
	ok := h != "" && h != "." && h != ".." && len(h) <= 200 &&
		strings.IndexFunc(h, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
		}) < 0
	if !ok {
		return fmt.Errorf("image holder %q: use letters, digits, '-', '_' and '.'", h)
	}
	return nil
}

// holders returns, for each image ID, the holders holding it, sorted.
func (s *Store) holders() (map[string][]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "holds"))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	out := map[string][]string{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "holds", e.Name()))
		if err != nil {
			continue // released meanwhile
		}
		var h hold
		if json.Unmarshal(b, &h) == nil {
			out[h.ID] = append(out[h.ID], name)
		}
	}
	return out, nil
}

// inUse explains why r cannot be removed, or returns nil.
func inUse(r *record, rs []*record, held map[string][]string) error {
	if hs := held[r.ID]; len(hs) > 0 {
		slices.Sort(hs)
		return fmt.Errorf("%s %s is used by sandbox(es) %s: remove them first: %w", r.Kind, displayName(r), strings.Join(hs, ", "), ErrInUse)
	}
	var snaps []string
	for _, o := range rs {
		if o.Base == r.ID {
			snaps = append(snaps, displayName(o))
		}
	}
	if len(snaps) > 0 {
		return fmt.Errorf("%s %s is the base of snapshot(s) %s: remove them first: %w", r.Kind, displayName(r), strings.Join(snaps, ", "), ErrInUse)
	}
	return nil
}

// displayName is a record's first name, else its short id.
func displayName(r *record) string {
	if len(r.Names) > 0 {
		return r.Names[0]
	}
	return shortID(r.ID)
}

// Remove removes the image or snapshot ref names (all its names), and the
// layers no other image uses unless a pull is running (Prune removes them
// then). The error matches ErrNotFound when there is none, ErrInUse when a
// holder holds it or a snapshot is based on it (the message names them).
func (s *Store) Remove(ctx context.Context, ref string) error {
	l, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer l.unlock()
	rs, err := s.records()
	if err != nil {
		return err
	}
	r, err := find(rs, ref)
	if err != nil {
		return err
	}
	held, err := s.holders()
	if err != nil {
		return err
	}
	if err := inUse(r, rs, held); err != nil {
		return err
	}
	if err := os.Remove(s.recordPath(r.ID)); err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	// A pull or AddLayer in progress may be about to use one of these
	// layers: remove them only when none runs.
	gc, ok, err := tryLockFile(s.gcLockPath(), unix.LOCK_EX)
	if err != nil || !ok {
		return err
	}
	defer gc.unlock()
	rest := slices.DeleteFunc(rs, func(o *record) bool { return o.ID == r.ID })
	used := usedLayers(rest)
	for _, lr := range r.Layers {
		if !used[hexOf(lr.Digest)] {
			if _, err := s.removeLayer(hexOf(lr.Digest)); err != nil {
				return err
			}
		}
	}
	return nil
}

// usedLayers returns the hex digests of the layers rs use.
func usedLayers(rs []*record) map[string]bool {
	used := map[string]bool{}
	for _, r := range rs {
		for _, l := range r.Layers {
			used[hexOf(l.Digest)] = true
		}
	}
	return used
}

// removeLayer removes layer folder h and its metadata and returns its
// size. The folder is first renamed into tmp/, so that a crash halfway
// never leaves a partial layer under its name.
func (s *Store) removeLayer(h string) (int64, error) {
	size, _ := s.layerSize("sha256:" + h)
	src := filepath.Join(s.dir, "layers", h)
	if err := os.Remove(src + ".json"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("image store: %w", err)
	}
	trash := filepath.Join(s.dir, "tmp", "rm-"+h+"-"+randomHex())
	if err := os.Rename(src, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("image store: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return 0, fmt.Errorf("image store: %w", err)
	}
	return size, nil
}

// PruneReport says what [Store.Prune] removed.
type PruneReport struct {
	// Images are the IDs of the images removed: those without a name that
	// no holder holds and no snapshot is based on (a tag pulled again
	// leaves the old image without one).
	Images []string `json:"images"`
	// Layers are the digests of the layers removed: those no image uses.
	Layers []string `json:"layers"`
	// Bytes is the size of those layers.
	Bytes int64 `json:"bytes"`
}

// Prune removes images without a name that nothing uses, the layers no
// image uses and what failed pulls left in the store's tmp folder. It
// waits for running pulls to end first.
func (s *Store) Prune(ctx context.Context) (PruneReport, error) {
	var rep PruneReport
	gc, err := lockFile(ctx, s.gcLockPath(), unix.LOCK_EX)
	if err != nil {
		return rep, err
	}
	defer gc.unlock()
	l, err := s.lock(ctx)
	if err != nil {
		return rep, err
	}
	defer l.unlock()
	rs, err := s.records()
	if err != nil {
		return rep, err
	}
	held, err := s.holders()
	if err != nil {
		return rep, err
	}
	var keep []*record
	for _, r := range rs {
		if len(r.Names) > 0 || inUse(r, rs, held) != nil {
			keep = append(keep, r)
			continue
		}
		if err := os.Remove(s.recordPath(r.ID)); err != nil {
			return rep, fmt.Errorf("image store: %w", err)
		}
		rep.Images = append(rep.Images, r.ID)
	}
	used := usedLayers(keep)
	ents, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		return rep, fmt.Errorf("image store: %w", err)
	}
	for _, e := range ents {
		h := strings.TrimSuffix(e.Name(), ".json")
		if used[h] {
			continue
		}
		if !e.IsDir() { // a size file whose folder is gone
			if err := os.Remove(filepath.Join(s.dir, "layers", e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return rep, fmt.Errorf("image store: %w", err)
			}
			continue
		}
		n, err := s.removeLayer(h)
		if err != nil {
			return rep, err
		}
		rep.Layers = append(rep.Layers, "sha256:"+h)
		rep.Bytes += n
	}
	// No pull or AddLayer runs (gc lock): what tmp/ holds is left over.
	tmp := filepath.Join(s.dir, "tmp")
	ents, err = os.ReadDir(tmp)
	if err != nil {
		return rep, fmt.Errorf("image store: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err != nil {
			return rep, fmt.Errorf("image store: %w", err)
		}
	}
	return rep, nil
}
