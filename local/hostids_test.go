package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The pool's own tests are package hostids's; these test local's pool:
// its keys (sandbox folders, spares), its seed (meta.json) and its base.

// poolStateDir returns a state dir with folders for the sandboxes ids.
func poolStateDir(t *testing.T, ids ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, id := range ids {
		if err := os.MkdirAll(sandboxDir(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// allocateWith allocates a range for id in stateDir's pool from base,
// avoiding reserved.
func allocateWith(t *testing.T, stateDir, id string, base int, reserved []idRange) (idRange, error) {
	t.Helper()
	p := hostIDPool(stateDir)
	p.Reserved = func() []idRange { return reserved }
	return p.Allocate(context.Background(), id, base)
}

// idPool is the content of hostIDsFile.
type idPool struct {
	Ranges map[string]idRange `json:"ranges"`
}

// TestPoolSeeded: a state dir without a pool file (made before pools)
// gets one from the ranges its sandboxes' metadata records.
func TestPoolSeeded(t *testing.T) {
	stateDir := poolStateDir(t, "old", "new")
	have := idRange{First: DefaultHostIDBase, Count: idRangeSize}
	if err := writeMeta(sandboxDir(stateDir, "old"), &meta{ID: "old", HostIDs: &have}); err != nil {
		t.Fatal(err)
	}
	r, err := allocateWith(t, stateDir, "new", DefaultHostIDBase, nil)
	if err != nil || r.Overlaps(have) {
		t.Errorf("new sandbox: %+v %v, beside %+v", r, err, have)
	}
}

// TestPoolSandboxFolders: a range whose sandbox folder is gone is taken
// back; one whose folder exists is kept.
func TestPoolSandboxFolders(t *testing.T) {
	const base = 1 << 16
	stateDir := poolStateDir(t, "a", "b", "c")
	ra, _ := allocateWith(t, stateDir, "a", base, nil)
	rb, _ := allocateWith(t, stateDir, "b", base, nil)
	if err := os.Remove(sandboxDir(stateDir, "a")); err != nil {
		t.Fatal(err)
	}
	if rc, err := allocateWith(t, stateDir, "c", base, nil); err != nil || rc != ra || rc == rb {
		t.Errorf("with a's folder gone, c got %+v %v; a had %+v, b has %+v", rc, err, ra, rb)
	}
}

func TestHostIDBaseOption(t *testing.T) {
	for base, ok := range map[int]bool{0: true, 1 << 16: true, DefaultHostIDBase: true, hostIDLimit - idRangeSize: true, 100000: false, -65536: false, hostIDLimit: false} {
		_, err := Options{HostIDBase: base}.normalize()
		if (err == nil) != ok || (err != nil && !errors.Is(err, sandbox.ErrInvalidArgument)) {
			t.Errorf("HostIDBase %d: %v", base, err)
		}
	}
}

// BenchmarkAllocateRelease measures giving a new sandbox a range (locking
// the pool, checking /etc/subuid and the user database) and returning it.
func BenchmarkAllocateRelease(b *testing.B) {
	ctx := context.Background()
	stateDir := b.TempDir()
	if err := os.MkdirAll(sandboxDir(stateDir, "a"), 0o700); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := allocateHostIDs(ctx, stateDir, "a", 0); err != nil {
			b.Fatal(err)
		}
		if err := releaseHostIDs(ctx, stateDir, "a"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPoolSpareKeys: a spare init's range (Pool) has no sandbox folder yet
// is kept while the process that started the spare runs, reclaimed once
// it has ended, and passed to the sandbox that takes the spare.
func TestPoolSpareKeys(t *testing.T) {
	const base = 1 << 16
	stateDir := poolStateDir(t, "x")
	live, dead := spareKey(), sparePrefix+"999999999:1:00"
	if !spareKeyLive(live) || spareKeyLive(dead) || spareKeyLive(sparePrefix+"nonsense") {
		t.Fatalf("spareKeyLive: own %v, dead %v", spareKeyLive(live), spareKeyLive(dead))
	}
	rl, err := allocateWith(t, stateDir, live, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := allocateWith(t, stateDir, dead, base, nil); err != nil {
		t.Fatal(err)
	}
	// The next allocation reclaims the dead process's range, not the
	// live one's.
	rx, err := allocateWith(t, stateDir, "x", base, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pool idPool
	if err := readJSON(filepath.Join(stateDir, hostIDsFile), &pool); err != nil {
		t.Fatal(err)
	}
	if _, ok := pool.Ranges[dead]; ok {
		t.Errorf("the range of a dead process's spare was kept: %v", pool.Ranges)
	}
	if pool.Ranges[live] != rl || rx == rl {
		t.Errorf("the live spare's range %+v: pool %v, x got %+v", rl, pool.Ranges, rx)
	}
	got, err := claimHostIDs(context.Background(), stateDir, live, "y")
	if err != nil || got != rl {
		t.Fatalf("claim: %+v %v, want %+v", got, err, rl)
	}
	pool = idPool{}
	if err := readJSON(filepath.Join(stateDir, hostIDsFile), &pool); err != nil {
		t.Fatal(err)
	}
	if _, ok := pool.Ranges[live]; ok || pool.Ranges["y"] != rl {
		t.Errorf("after the claim: %v", pool.Ranges)
	}
	if _, err := claimHostIDs(context.Background(), stateDir, live, "z"); err == nil || !strings.Contains(err.Error(), "spare init") {
		t.Errorf("claiming a range twice: %v", err)
	}
}
