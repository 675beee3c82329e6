package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"
)

// cacheEntry is what the step cache records for a key: the layer the step
// made ("" for none).
type cacheEntry struct {
	Layer string `json:"layer"`
	// Instruction is the Dockerfile text, for people reading the cache.
	Instruction string `json:"instruction"`
}

// cache is the step cache: a JSON file per key in dir.
type cache struct{ dir string }

func (c cache) path(key string) string {
	return filepath.Join(c.dir, strings.TrimPrefix(key, "sha256:")+".json")
}

// get returns the entry of key, if any and its layer still exists (a
// prune of the store may have removed it).
func (c cache) get(key string) (cacheEntry, bool) {
	if c.dir == "" {
		return cacheEntry{}, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return cacheEntry{}, false
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil {
		return cacheEntry{}, false
	}
	if e.Layer != "" {
		if fi, err := os.Stat(e.Layer); err != nil || !fi.IsDir() {
			return cacheEntry{}, false
		}
	}
	return e, true
}

// put records the entry of key, atomically (a temporary file renamed into
// place), so that a concurrent build reads the old entry or the new one.
func (c cache) put(key string, e cacheEntry) error {
	if c.dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("build cache: %w", err)
	}
	if err := atomicfile.WriteJSON(c.path(key), e); err != nil {
		return fmt.Errorf("build cache: %w", err)
	}
	return nil
}

// PruneCache removes the entries of the step cache in dir whose layer is
// gone (a prune of the image store removed it), and returns how many it
// removed, and those of the caches in its subfolders (agentbox serve
// keeps one per organization there). A missing dir has nothing to prune.
func PruneCache(dir string) (int, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("build cache: %w", err)
	}
	c, n := cache{dir: dir}, 0
	for _, e := range es {
		if e.IsDir() {
			m, err := PruneCache(filepath.Join(dir, e.Name()))
			n += m
			if err != nil {
				return n, err
			}
			continue
		}
		key, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, ok := c.get(key); ok {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("build cache: %w", err)
		}
		n++
	}
	return n, nil
}
