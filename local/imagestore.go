package local

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

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/image"
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

// openImages opens the image store of stateDir.
//
// SEAM (issue 9): this is where package image's Store comes in, as
// image.Open(filepath.Join(stateDir, imagesDir)) with Resolve given the
// default image.PullOptions. Until then a folder store stands in for it:
// it knows rootfs folders (absolute paths) and the snapshots made here.
func openImages(stateDir string) (imageStore, error) {
	dir := filepath.Join(stateDir, imagesDir)
	if err := os.MkdirAll(filepath.Join(dir, "layers"), 0o700); err != nil {
		return nil, stateDirError(stateDir, err)
	}
	return &folderStore{dir: dir}, nil
}

// folderStore is the stand-in image store of openImages: an index file
// of images and holders, changed under a lock file.
type folderStore struct{ dir string }

// folderIndex is the folder store's index.
type folderIndex struct {
	Images []*image.Image    `json:"images"`
	Holds  map[string]string `json:"holds"` // holder → image ID
}

// update runs f on the index under the store's lock, and writes the
// index back when f returns nil and changed is true.
func (s *folderStore) update(f func(ix *folderIndex) (changed bool, err error)) error {
	lock, err := os.OpenFile(filepath.Join(s.dir, "index.lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	ix := &folderIndex{Holds: map[string]string{}}
	if err := readJSON(filepath.Join(s.dir, "index.json"), ix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if ix.Holds == nil {
		ix.Holds = map[string]string{}
	}
	changed, err := f(ix)
	if err != nil || !changed {
		return err
	}
	return writeJSON(filepath.Join(s.dir, "index.json"), ix)
}

// find returns the image of ix named, or with the id (or id prefix) ref.
func (ix *folderIndex) find(ref string) *image.Image {
	for _, img := range ix.Images {
		if slices.Contains(img.Names, ref) || img.ID == ref || strings.HasPrefix(img.ID, "sha256:"+ref) {
			return img
		}
	}
	return nil
}

func (s *folderStore) Get(ctx context.Context, ref string) (*image.Image, error) {
	var found *image.Image
	err := s.update(func(ix *folderIndex) (bool, error) {
		found = ix.find(ref)
		return false, nil
	})
	if err == nil && found == nil {
		err = fmt.Errorf("%w: %s", image.ErrNotFound, ref)
	}
	return found, err
}

func (s *folderStore) Resolve(ctx context.Context, ref string) (*image.Image, error) {
	img, err := s.Get(ctx, ref)
	if !errors.Is(err, image.ErrNotFound) || !filepath.IsAbs(ref) {
		return img, err
	}
	if fi, err := os.Stat(ref); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a rootfs folder", image.ErrNotFound, ref)
	}
	return s.Save(ctx, &image.Image{Kind: image.KindImage, Names: []string{ref}, Layers: []string{filepath.Clean(ref)}})
}

func (s *folderStore) List(ctx context.Context) ([]*image.Image, error) {
	var all []*image.Image
	err := s.update(func(ix *folderIndex) (bool, error) {
		all = ix.Images
		return false, nil
	})
	return all, err
}

func (s *folderStore) Remove(ctx context.Context, ref string) error {
	return s.update(func(ix *folderIndex) (bool, error) {
		img := ix.find(ref)
		if img == nil {
			return false, fmt.Errorf("%w: %s", image.ErrNotFound, ref)
		}
		var holders []string
		for h, id := range ix.Holds {
			if id == img.ID {
				holders = append(holders, "sandbox "+h)
			}
		}
		for _, o := range ix.Images {
			if o.Base == img.ID {
				holders = append(holders, "snapshot "+o.ID)
			}
		}
		if len(holders) > 0 {
			slices.Sort(holders)
			return false, fmt.Errorf("remove %s: %w by %s", ref, image.ErrInUse, strings.Join(holders, ", "))
		}
		ix.Images = slices.DeleteFunc(ix.Images, func(o *image.Image) bool { return o == img })
		for _, l := range img.Layers {
			if within(l, filepath.Join(s.dir, "layers")) {
				_ = removeAll(l)
			}
		}
		return true, nil
	})
}

func (s *folderStore) AddLayer(ctx context.Context, fill func(dir string) error) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "layers"), ".new-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := fill(tmp); err != nil {
		_ = removeAll(tmp)
		return "", err
	}
	dst := filepath.Join(s.dir, "layers", strings.TrimPrefix(filepath.Base(tmp), ".new-"))
	if err := os.Rename(tmp, dst); err != nil {
		_ = removeAll(tmp)
		return "", err
	}
	return dst, nil
}

func (s *folderStore) Save(ctx context.Context, img *image.Image) (*image.Image, error) {
	c := *img
	b, _ := json.Marshal(struct {
		L []string
		C image.Config
		B string
	}{c.Layers, c.Config, c.Base})
	sum := sha256.Sum256(b)
	c.ID = "sha256:" + hex.EncodeToString(sum[:])
	err := s.update(func(ix *folderIndex) (bool, error) {
		for _, n := range c.Names {
			if ix.find(n) != nil {
				return false, fmt.Errorf("%w: %s", image.ErrExists, n)
			}
		}
		ix.Images = append(ix.Images, &c)
		return true, nil
	})
	return &c, err
}

func (s *folderStore) Hold(holder, ref string) (*image.Image, error) {
	var found *image.Image
	err := s.update(func(ix *folderIndex) (bool, error) {
		if found = ix.find(ref); found == nil {
			return false, fmt.Errorf("%w: %s", image.ErrNotFound, ref)
		}
		ix.Holds[holder] = found.ID
		return true, nil
	})
	return found, err
}

func (s *folderStore) Release(holder string) error {
	return s.update(func(ix *folderIndex) (bool, error) {
		_, held := ix.Holds[holder]
		delete(ix.Holds, holder)
		return held, nil
	})
}
