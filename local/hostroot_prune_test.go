//go:build linux

package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPruneHostBases: when the host's /etc changed, the base layers that no
// sandbox records go; the current one, one a sandbox (stopped included)
// records and the previous current one while recently handed out stay.
func TestPruneHostBases(t *testing.T) {
	stateDir := t.TempDir()
	dir := filepath.Join(stateDir, hostBaseDir)
	for _, b := range []string{"unused", "recorded", "previous", "current", ".new-123"} {
		if err := os.MkdirAll(filepath.Join(dir, b, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sbx := sandboxDir(stateDir, "stopped")
	if err := os.MkdirAll(sbx, 0o700); err != nil {
		t.Fatal(err)
	}
	m := meta{ID: "stopped", Root: &rootRecord{Host: true, Layers: []string{filepath.Join(dir, "recorded")}}}
	if err := writeMeta(sbx, &m); err != nil {
		t.Fatal(err)
	}
	// A sandbox being made: no metadata yet.
	if err := os.MkdirAll(sandboxDir(stateDir, "new"), 0o700); err != nil {
		t.Fatal(err)
	}
	pruneHostBases(stateDir, "current", hostBaseCurrent{Base: "previous", Checked: time.Now().Add(-time.Minute)})
	if got, want := baseNames(t, dir), []string{".new-123", "current", "previous", "recorded"}; !slices.Equal(got, want) {
		t.Errorf("after a prune with a recent previous base: %v, want %v", got, want)
	}
	pruneHostBases(stateDir, "current", hostBaseCurrent{Base: "previous", Checked: time.Now().Add(-2 * hostBaseKeep)})
	if got, want := baseNames(t, dir), []string{".new-123", "current", "recorded"}; !slices.Equal(got, want) {
		t.Errorf("after a prune with an old previous base: %v, want %v", got, want)
	}
	// An unreadable record may name any base: nothing goes.
	if err := os.WriteFile(filepath.Join(sandboxDir(stateDir, "new"), metaFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(sbx, metaFile)); err != nil {
		t.Fatal(err)
	}
	pruneHostBases(stateDir, "current", hostBaseCurrent{})
	if got, want := baseNames(t, dir), []string{".new-123", "current", "recorded"}; !slices.Equal(got, want) {
		t.Errorf("with an unreadable record: %v, want %v", got, want)
	}
}

// baseNames lists the folder dir.
func baseNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
