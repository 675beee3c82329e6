package hostids

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/lockfile"
)

// testPool returns a pool in a temporary state dir with folders for the
// keys ids: a key's range is stale when its folder is gone.
func testPool(t *testing.T, ids ...string) *Pool {
	t.Helper()
	dir := t.TempDir()
	for _, id := range ids {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &Pool{
		Name: dir,
		File: filepath.Join(dir, "hostids.json"),
		Lock: func(ctx context.Context) (*os.File, error) {
			f, err := os.OpenFile(filepath.Join(dir, "hostids.lock"), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return nil, err
			}
			if err := lockfile.Lock(ctx, f, unix.LOCK_EX); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		},
		Stale: func(key string) bool {
			_, err := os.Stat(filepath.Join(dir, key))
			return errors.Is(err, fs.ErrNotExist)
		},
		Seed: func() map[string]Range { return map[string]Range{} },
	}
}

// allocateWith allocates a range for id in p from base, avoiding reserved.
func allocateWith(t *testing.T, p *Pool, id string, base int, reserved []Range) (Range, error) {
	t.Helper()
	q := *p
	q.Reserved = func() []Range { return reserved }
	return q.Allocate(context.Background(), id, base)
}

// readPool returns the ranges p's file records.
func readPool(t *testing.T, p *Pool) map[string]Range {
	t.Helper()
	var f poolFile
	b, err := os.ReadFile(p.File)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Ranges
}

// TestPoolAllocate: ranges are 65536 ids from the base, each sandbox its
// own, skipping the legacy range, subordinate id ranges and users' ids;
// asking again returns the same range; a returned range is
// reused; a range whose sandbox folder is gone is reclaimed.
func TestPoolAllocate(t *testing.T) {
	const base = 1 << 16
	p := testPool(t, "a", "b", "c", "d")
	reserved := []Range{{First: 4 << 16, Count: 10}, {First: 5<<16 + 1000, Count: 1}}
	want := map[string]int{"a": 3 << 16, "b": 6 << 16, "c": 7 << 16} // 1, 2: legacy; 4: subuid; 5: a user
	for _, id := range []string{"a", "b", "c", "a"} {
		r, err := allocateWith(t, p, id, base, reserved)
		if err != nil || r != (Range{First: want[id], Count: 1 << 16}) {
			t.Errorf("allocate %s: %+v %v, want from %d", id, r, err, want[id])
		}
	}
	if err := p.Release(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if r, _ := allocateWith(t, p, "d", base, reserved); r.First != 6<<16 {
		t.Errorf("after b's release, d got %+v, want b's range", r)
	}
	if err := os.Remove(filepath.Join(p.Name, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(p.Name, "e"), 0o700); err != nil {
		t.Fatal(err)
	}
	if r, _ := allocateWith(t, p, "e", base, reserved); r.First != 3<<16 {
		t.Errorf("with a's folder gone, e got %+v, want a's range", r)
	}
	if got := readPool(t, p); fmt.Sprint(got) != fmt.Sprint(map[string]Range{"c": {7 << 16, 1 << 16}, "d": {6 << 16, 1 << 16}, "e": {3 << 16, 1 << 16}}) {
		t.Errorf("pool file: %v", got)
	}
}

// TestPoolDefaultBase: without a base, ranges come from the default pool,
// starting at a place the state dir decides, the same each time.
func TestPoolDefaultBase(t *testing.T) {
	p := testPool(t, "a")
	r, err := allocateWith(t, p, "a", 0, nil)
	first, slots, start := Bounds(p.Name, 0)
	if err != nil || r.First != first+start*Size || first != DefaultBase || slots != 4094 {
		t.Errorf("%+v %v; pool from %d, %d ranges, start %d", r, err, first, slots, start)
	}
	if _, _, again := Bounds(p.Name, 0); again != start {
		t.Errorf("start %d, then %d", start, again)
	}
}

// TestPoolFull: a pool without a free range says so and what to do.
func TestPoolFull(t *testing.T) {
	p := testPool(t, "a", "b")
	base := Limit - Size
	if _, err := allocateWith(t, p, "a", base, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateWith(t, p, "b", base, nil); err == nil || !strings.Contains(err.Error(), "no free host uid range") || !strings.Contains(err.Error(), "HostIDBase") {
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
	p := testPool(t, ids...)
	got := make([]Range, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Allocate(context.Background(), id, 0)
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		}()
	}
	wg.Wait()
	for i := range got {
		for j := range i {
			if got[i].Overlaps(got[j]) {
				t.Errorf("%s and %s both got %+v", ids[i], ids[j], got[i])
			}
		}
	}
	if ranges := readPool(t, p); len(ranges) != n {
		t.Errorf("pool file: %v", ranges)
	}
}

// TestPoolReserve: a sandbox keeps the range its metadata records; two of
// the shared-range era may share theirs; a range another sandbox has is
// refused, naming both.
func TestPoolReserve(t *testing.T) {
	ctx := context.Background()
	p := testPool(t, "a", "b", "old1", "old2")
	r := Range{First: DefaultBase, Count: Size}
	if err := p.Reserve(ctx, "a", r); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"old1", "old2"} {
		if err := p.Reserve(ctx, id, Legacy); err != nil {
			t.Errorf("legacy %s: %v", id, err)
		}
	}
	err := p.Reserve(ctx, "b", r)
	if err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("b taking a's range: %v", err)
	}
	if err := p.Reserve(ctx, "a", r); err != nil {
		t.Errorf("a again: %v", err)
	}
}

// TestPoolClaim: a claimed range moves to its new key; claiming a key
// the pool lacks is refused.
func TestPoolClaim(t *testing.T) {
	ctx := context.Background()
	p := testPool(t, "spare", "x")
	r, err := p.Allocate(ctx, "spare", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Claim(ctx, "spare", "x"); err != nil || got != r {
		t.Fatalf("claim: %+v %v, want %+v", got, err, r)
	}
	if got := readPool(t, p); len(got) != 1 || got["x"] != r {
		t.Errorf("after the claim: %v", got)
	}
	if _, err := p.Claim(ctx, "spare", "y"); err == nil || !strings.Contains(err.Error(), "spare init") {
		t.Errorf("claiming a range twice: %v", err)
	}
}

// TestPoolSeeded: a pool without its file starts from the ranges Seed
// returns, and writes them.
func TestPoolSeeded(t *testing.T) {
	p := testPool(t, "old", "new")
	have := Range{First: DefaultBase, Count: Size}
	p.Seed = func() map[string]Range { return map[string]Range{"old": have} }
	r, err := allocateWith(t, p, "new", DefaultBase, nil)
	if err != nil || r.Overlaps(have) {
		t.Errorf("new sandbox: %+v %v, beside %+v", r, err, have)
	}
	if got := readPool(t, p); got["old"] != have {
		t.Errorf("pool file %v lacks the seeded range", got)
	}
}

// TestPoolBadFile: a pool file that is not JSON is reported with what to
// do, and releasing without a pool file does nothing.
func TestPoolBadFile(t *testing.T) {
	p := testPool(t, "a")
	if err := p.Release(context.Background(), "a"); err != nil {
		t.Errorf("release without a pool: %v", err)
	}
	if _, err := os.Stat(p.File); err == nil {
		t.Errorf("release without a pool wrote %s", p.File)
	}
	if err := os.WriteFile(p.File, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate(context.Background(), "a", 0); err == nil || !strings.Contains(err.Error(), "remove hostids.json") {
		t.Errorf("a broken pool file: %v", err)
	}
}

func TestSubIDRanges(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "subuid")
	if err := os.WriteFile(f, []byte("alice:100000:65536\n# comment\nbad line\n1001:231072:65536\nzero:5:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := SubIDRanges(f, filepath.Join(dir, "absent"))
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
	if got := UserDBIDs(passwd, group, filepath.Join(dir, "absent")); fmt.Sprint(got) != "[{1879048200 1} {70000 1}]" {
		t.Errorf("ids %v", got)
	}
}

// TestRangeJSON: a range is written as meta.json and the pool file have
// always recorded it.
func TestRangeJSON(t *testing.T) {
	b, err := json.Marshal(Range{First: DefaultBase, Count: Size})
	if err != nil || string(b) != `{"first":1879048192,"count":65536}` {
		t.Errorf("JSON %s %v", b, err)
	}
}
