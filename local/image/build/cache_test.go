package build

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCacheEntriesAndPrune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	layer := t.TempDir()
	c := cache{dir: dir}
	if _, ok := c.get("sha256:aa"); ok {
		t.Fatal("an empty cache has an entry")
	}
	for key, e := range map[string]cacheEntry{"sha256:aa": {Layer: layer, Instruction: "RUN a"}, "sha256:bb": {Layer: filepath.Join(layer, "gone")}, "sha256:cc": {}} {
		if err := c.put(key, e); err != nil {
			t.Fatal(err)
		}
	}
	if e, ok := c.get("sha256:aa"); !ok || e.Layer != layer || e.Instruction != "RUN a" {
		t.Errorf("get(aa) = %+v, %v", e, ok)
	}
	if _, ok := c.get("sha256:bb"); ok {
		t.Error("an entry whose layer is gone is a hit")
	}
	if _, ok := c.get("sha256:cc"); !ok {
		t.Error("an entry of a step without a layer is a miss")
	}
	n, err := PruneCache(dir)
	if err != nil || n != 1 {
		t.Errorf("PruneCache = %d, %v; want 1 (bb)", n, err)
	}
	es, _ := os.ReadDir(dir)
	if len(es) != 2 {
		t.Errorf("%d files left in the cache, want aa and cc (no temporary files)", len(es))
	}
	if n, err := PruneCache(filepath.Join(dir, "none")); n != 0 || err != nil {
		t.Errorf("PruneCache of a missing folder = %d, %v", n, err)
	}
}

// PruneCache prunes the caches of subfolders too (serve's, one per
// organization).
func TestPruneCacheSubfolders(t *testing.T) {
	dir := t.TempDir()
	sub := cache{dir: filepath.Join(dir, "orgs", "x")}
	if err := sub.put("sha256:dd", cacheEntry{Layer: filepath.Join(dir, "gone")}); err != nil {
		t.Fatal(err)
	}
	if err := sub.put("sha256:ee", cacheEntry{}); err != nil {
		t.Fatal(err)
	}
	if n, err := PruneCache(dir); n != 1 || err != nil {
		t.Fatalf("PruneCache = %d, %v; want 1 (dd, in a subfolder)", n, err)
	}
	if _, ok := sub.get("sha256:ee"); !ok {
		t.Error("the live entry of the subfolder was pruned")
	}
}
