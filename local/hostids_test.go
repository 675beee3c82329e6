package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

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
	p, err := openPool(context.Background(), stateDir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.allocate(id, base, reserved)
	if cerr := p.close(); cerr != nil {
		t.Fatal(cerr)
	}
	return r, err
}

// TestPoolAllocate: ranges are 65536 ids from the base, each sandbox its
// own, skipping the legacy range, subordinate id ranges and users' ids;
// asking again returns the same range; a returned range is
// reused; a range whose sandbox folder is gone is reclaimed.
func TestPoolAllocate(t *testing.T) {
	const base = 1 << 16
	stateDir := poolStateDir(t, "a", "b", "c", "d")
	reserved := []idRange{{First: 4 << 16, Count: 10}, {First: 5<<16 + 1000, Count: 1}}
	want := map[string]int{"a": 3 << 16, "b": 6 << 16, "c": 7 << 16} // 1, 2: legacy; 4: subuid; 5: a user
	for _, id := range []string{"a", "b", "c", "a"} {
		r, err := allocateWith(t, stateDir, id, base, reserved)
		if err != nil || r != (idRange{First: want[id], Count: 1 << 16}) {
			t.Errorf("allocate %s: %+v %v, want from %d", id, r, err, want[id])
		}
	}
	if err := releaseHostIDs(context.Background(), stateDir, "b"); err != nil {
		t.Fatal(err)
	}
	if r, _ := allocateWith(t, stateDir, "d", base, reserved); r.First != 6<<16 {
		t.Errorf("after b's release, d got %+v, want b's range", r)
	}
	if err := os.Remove(sandboxDir(stateDir, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sandboxDir(stateDir, "e"), 0o700); err != nil {
		t.Fatal(err)
	}
	if r, _ := allocateWith(t, stateDir, "e", base, reserved); r.First != 3<<16 {
		t.Errorf("with a's folder gone, e got %+v, want a's range", r)
	}
	var pool idPool
	if err := readJSON(filepath.Join(stateDir, hostIDsFile), &pool); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pool.Ranges) != fmt.Sprint(map[string]idRange{"c": {7 << 16, 1 << 16}, "d": {6 << 16, 1 << 16}, "e": {3 << 16, 1 << 16}}) {
		t.Errorf("pool file: %v", pool.Ranges)
	}
}

// TestPoolDefaultBase: without a base, ranges come from the default pool,
// starting at a place the state dir decides, the same each time.
func TestPoolDefaultBase(t *testing.T) {
	stateDir := poolStateDir(t, "a")
	r, err := allocateWith(t, stateDir, "a", 0, nil)
	first, slots, start := poolBounds(stateDir, 0)
	if err != nil || r.First != first+start*idRangeSize || first != DefaultHostIDBase || slots != 4094 {
		t.Errorf("%+v %v; pool from %d, %d ranges, start %d", r, err, first, slots, start)
	}
	if _, _, again := poolBounds(stateDir, 0); again != start {
		t.Errorf("start %d, then %d", start, again)
	}
}

// TestPoolFull: a pool without a free range says so and what to do.
func TestPoolFull(t *testing.T) {
	stateDir := poolStateDir(t, "a", "b")
	base := hostIDLimit - idRangeSize
	if _, err := allocateWith(t, stateDir, "a", base, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateWith(t, stateDir, "b", base, nil); err == nil || !strings.Contains(err.Error(), "no free host uid range") || !strings.Contains(err.Error(), "HostIDBase") {
		t.Errorf("allocation from a full pool: %v", err)
	}
}

// TestPoolConcurrent: allocations at the same time, each holding the
// pool's flock through its own descriptor as separate processes would,
// get disjoint ranges, all recorded.
func TestPoolConcurrent(t *testing.T) {
	const n = 16
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("s%d", i))
	}
	stateDir := poolStateDir(t, ids...)
	got := make([]idRange, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := allocateHostIDs(context.Background(), stateDir, id, 0)
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		}()
	}
	wg.Wait()
	for i := range got {
		for j := range i {
			if got[i].overlaps(got[j]) {
				t.Errorf("%s and %s both got %+v", ids[i], ids[j], got[i])
			}
		}
	}
	var pool idPool
	if err := readJSON(filepath.Join(stateDir, hostIDsFile), &pool); err != nil || len(pool.Ranges) != n {
		t.Errorf("pool file: %v %v", pool.Ranges, err)
	}
}

// TestPoolReserve: a sandbox keeps the range its metadata records; two of
// the shared-range era may share theirs; a range another sandbox has is
// refused, naming both.
func TestPoolReserve(t *testing.T) {
	ctx := context.Background()
	stateDir := poolStateDir(t, "a", "b", "old1", "old2")
	r := idRange{First: DefaultHostIDBase, Count: idRangeSize}
	if err := reserveHostIDs(ctx, stateDir, "a", r); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"old1", "old2"} {
		if err := reserveHostIDs(ctx, stateDir, id, legacyIDs); err != nil {
			t.Errorf("legacy %s: %v", id, err)
		}
	}
	err := reserveHostIDs(ctx, stateDir, "b", r)
	if err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("b taking a's range: %v", err)
	}
	if err := reserveHostIDs(ctx, stateDir, "a", r); err != nil {
		t.Errorf("a again: %v", err)
	}
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
	if err != nil || r.overlaps(have) {
		t.Errorf("new sandbox: %+v %v, beside %+v", r, err, have)
	}
}

func TestSubIDRanges(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "subuid")
	if err := os.WriteFile(f, []byte("alice:100000:65536\n# comment\nbad line\n1001:231072:65536\nzero:5:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := subIDRanges(f, filepath.Join(dir, "absent"))
	if fmt.Sprint(got) != "[{100000 65536} {231072 65536}]" {
		t.Errorf("ranges %v", got)
	}
}

func TestUserDBIDs(t *testing.T) {
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\nldap:x:1879048200:1:::\nbad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(group, []byte("big:x:70000:\nusers:x:100:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := userDBIDs(passwd, group, filepath.Join(dir, "absent")); fmt.Sprint(got) != "[{1879048200 1} {70000 1}]" {
		t.Errorf("ids %v", got)
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
