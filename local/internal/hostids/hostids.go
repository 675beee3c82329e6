// Package hostids keeps the pool of host uid ranges of sandboxes started
// by root. Each sandbox gets a range of Size host uids (and the same
// gids) of its own, so that no two sandboxes share a kernel key quota,
// per-uid counter or file owner. The ranges come from a pool recorded in
// a file (Pool.File, guarded by the caller's flock, Pool.Lock, so
// creators in several processes never take one range twice): a sandbox
// keeps its range while it exists, stopped included, so that its files
// stay its own; destroying it returns the range to the pool.
//
// The pool spans [base, Limit) in steps of Size, each range starting at
// a multiple of 65536 as systemd recommends to container managers (the
// upper 16 bits name the sandbox, the lower 16 are the uid inside). By
// default base is DefaultBase, above the ranges useradd hands out in
// /etc/subuid (100000 to 600100000 by default) and systemd's container
// ranges (524288 to 1879048191), and the search starts at a place
// derived from the pool's name (its state dir), so that two state dirs
// of one machine seldom meet; a range that overlaps one listed in
// /etc/subuid or /etc/subgid (for any user), or holds the id of a user in
// /etc/passwd or of a group in /etc/group, is skipped. Directory services
// (LDAP …) are not asked, for speed: where they hand out ids that high,
// choose another base.
package hostids

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"
)

const (
	// Size is how many ids a sandbox started by root has: 0 to 65535
	// inside, the full 16-bit range (nobody, 65534, included).
	Size = 1 << 16
	// DefaultBase is the first host uid of the ranges, unless a base is
	// given: 0x70000000, the start of the range systemd leaves unused
	// between its container ranges and its foreign range.
	DefaultBase = 0x70000000
	// Limit ends the pool: systemd's foreign uid range starts there, and
	// uids from 2^31 up trouble programs that take them for signed.
	Limit = 0x7FFE0000
	// LegacyBase starts the range every sandbox started by root shared
	// before ranges were per sandbox (Legacy).
	LegacyBase = 100000
)

// Legacy is the range sandboxes shared before ranges were per sandbox.
// Those sandboxes keep it (their files are owned by it); it is never
// given to another.
var Legacy = Range{First: LegacyBase, Count: Size}

// Range is a range of host uids (and the same gids).
type Range struct {
	First int `json:"first"`
	Count int `json:"count"`
}

// End returns the first id after r.
func (r Range) End() int { return r.First + r.Count }

// Overlaps reports whether r and o share an id.
func (r Range) Overlaps(o Range) bool { return r.First < o.End() && o.First < r.End() }

// Pool is where a state dir keeps its ranges, by key (a sandbox id, or
// another key of the caller's).
type Pool struct {
	// Name names the pool in errors (its state dir), and decides where a
	// search from the default base starts.
	Name string
	// File is the pool's JSON file.
	File string
	// Lock takes the pool's exclusive lock; closing the file it returns
	// releases it.
	Lock func(ctx context.Context) (*os.File, error)
	// Stale reports whether the range of key is left by an owner that no
	// longer exists (and may be taken back).
	Stale func(key string) bool
	// Seed returns the ranges to record when File does not exist (a pool
	// made before the file, or whose file was deleted).
	Seed func() map[string]Range
	// Reserved returns the ranges to avoid besides the pool's and Legacy;
	// nil: those of /etc/subuid and /etc/subgid, and the ids of users and
	// groups (SubIDRanges, UserDBIDs).
	Reserved func() []Range
	// WriteError wraps an error writing File; nil: as it is.
	WriteError func(error) error
}

// poolFile is the content of Pool.File.
type poolFile struct {
	// Ranges are the ranges of the pool, by key.
	Ranges map[string]Range `json:"ranges"`
}

// locked is a pool, read under its lock.
type locked struct {
	*Pool
	lock *os.File
	poolFile
	changed bool
}

// open locks the pool and reads it, seeding it when its file is missing.
func (p *Pool) open(ctx context.Context) (*locked, error) {
	f, err := p.Lock(ctx)
	if err != nil {
		return nil, err
	}
	l := &locked{Pool: p, lock: f}
	b, err := os.ReadFile(p.File)
	if err == nil {
		err = json.Unmarshal(b, &l.poolFile)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.Ranges, l.changed = p.Seed(), true
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("host id pool of %s: %w; remove %s to rebuild it from the sandboxes' metadata", p.Name, err, filepath.Base(p.File))
	case l.Ranges == nil:
		l.Ranges = map[string]Range{}
	}
	return l, nil
}

// close writes the pool if it changed and unlocks it.
func (l *locked) close() error {
	defer l.lock.Close() // releases the flock
	if !l.changed {
		return nil
	}
	if err := atomicfile.WriteJSON(l.File, &l.poolFile); err != nil {
		if l.WriteError != nil {
			return l.WriteError(err)
		}
		return err
	}
	return nil
}

// with runs f on the locked pool, then writes and unlocks it; the error
// is f's, else close's.
func (p *Pool) with(ctx context.Context, f func(*locked) error) error {
	l, err := p.open(ctx)
	if err != nil {
		return err
	}
	err = f(l)
	if cerr := l.close(); err == nil {
		err = cerr
	}
	return err
}

// Allocate gives key a range of its own from the pool and returns it. A
// range the pool already gives key is returned as it is. base is the
// first id of the pool (0: DefaultBase).
func (p *Pool) Allocate(ctx context.Context, key string, base int) (Range, error) {
	var r Range
	err := p.with(ctx, func(l *locked) (err error) {
		r, err = l.allocate(key, base)
		return err
	})
	return r, err
}

// allocate gives key a free range: see Allocate.
func (l *locked) allocate(key string, base int) (Range, error) {
	if r, ok := l.Ranges[key]; ok {
		return r, nil
	}
	taken := append([]Range{Legacy}, l.reserved()...)
	for other, r := range l.Ranges {
		if l.Stale(other) {
			// Its sandbox was removed without returning it (e.g. the
			// process died halfway).
			delete(l.Ranges, other)
			l.changed = true
			continue
		}
		taken = append(taken, r)
	}
	first, slots, start := Bounds(l.Name, base)
	for i := range slots {
		r := Range{First: first + (start+i)%slots*Size, Count: Size}
		if overlapsAny(r, taken) {
			continue
		}
		l.Ranges[key] = r
		l.changed = true
		return r, nil
	}
	return Range{}, fmt.Errorf("no free host uid range for sandbox %q: the %d ranges of %d ids from %d are given to sandboxes of %s, listed in /etc/subuid or hold users' ids; remove sandboxes, or set Options.HostIDBase to a lower base", key, slots, Size, first, l.Name)
}

// reserved returns the ranges to avoid besides the pool's (Pool.Reserved).
func (p *Pool) reserved() []Range {
	if p.Reserved != nil {
		return p.Reserved()
	}
	return append(SubIDRanges("/etc/subuid", "/etc/subgid"), UserDBIDs("/etc/passwd", "/etc/group")...)
}

// Bounds returns the first id of the pool named name for the base base,
// how many ranges it holds, and the range (counted from the first) where
// a search starts: 0 for a base of the caller's, else one derived from
// name.
func Bounds(name string, base int) (first, slots, start int) {
	if base != 0 {
		return base, (Limit - base) / Size, 0
	}
	slots = (Limit - DefaultBase) / Size
	h := fnv.New32a()
	h.Write([]byte(name))
	return DefaultBase, slots, int(h.Sum32() % uint32(slots))
}

func overlapsAny(r Range, rs []Range) bool {
	for _, o := range rs {
		if r.Overlaps(o) {
			return true
		}
	}
	return false
}

// Reserve records in the pool that key has the range r, which its owner
// says it has. It fails when another key has an overlapping range,
// unless both have the Legacy range.
func (p *Pool) Reserve(ctx context.Context, key string, r Range) error {
	return p.with(ctx, func(l *locked) error { return l.reserve(key, r) })
}

func (l *locked) reserve(key string, r Range) error {
	if have, ok := l.Ranges[key]; ok && have == r {
		return nil
	}
	for _, other := range slices.Sorted(maps.Keys(l.Ranges)) {
		o := l.Ranges[other]
		if other == key || !o.Overlaps(r) || (o == Legacy && r == Legacy) {
			continue
		}
		if l.Stale(other) {
			delete(l.Ranges, other)
			continue
		}
		return fmt.Errorf("sandbox %q has host uids %d-%d, which sandbox %q of %s has too (its %s was edited or lost): remove one of the two sandboxes", key, r.First, r.End()-1, other, l.Name, filepath.Base(l.File))
	}
	l.Ranges[key] = r
	l.changed = true
	return nil
}

// Claim moves the range of the key from to the key to, and returns it;
// an error when from has none.
func (p *Pool) Claim(ctx context.Context, from, to string) (Range, error) {
	var r Range
	var ok bool
	err := p.with(ctx, func(l *locked) error {
		if r, ok = l.Ranges[from]; ok {
			delete(l.Ranges, from)
			l.Ranges[to] = r
			l.changed = true
		}
		return nil
	})
	if err != nil {
		return Range{}, err
	}
	if !ok {
		return Range{}, fmt.Errorf("host uid range of a spare init: not in the pool of %s (%s was edited or lost)", p.Name, filepath.Base(p.File))
	}
	return r, nil
}

// Release returns the range of key to the pool, if it has one; without
// a pool file there is nothing to release.
func (p *Pool) Release(ctx context.Context, key string) error {
	if _, err := os.Stat(p.File); err != nil {
		return nil // no pool: no sandbox was started by root here
	}
	return p.with(ctx, func(l *locked) error {
		if _, ok := l.Ranges[key]; ok {
			delete(l.Ranges, key)
			l.changed = true
		}
		return nil
	})
}

// SubIDRanges returns the ranges the subordinate id files (/etc/subuid
// format: "user:first:count" lines) list, for any user.
func SubIDRanges(files ...string) []Range {
	var out []Range
	eachColonLine(files, func(f []string) {
		if len(f) != 3 {
			return
		}
		first, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && count > 0 {
			out = append(out, Range{First: first, Count: count})
		}
	})
	return out
}

// UserDBIDs returns, as ranges of one, the ids from Size up of the users
// and groups the user database files (/etc/passwd format: the id in the
// third field) list.
func UserDBIDs(files ...string) []Range {
	var out []Range
	eachColonLine(files, func(f []string) {
		if len(f) < 4 {
			return
		}
		if id, err := strconv.Atoi(f[2]); err == nil && id >= Size {
			out = append(out, Range{First: id, Count: 1})
		}
	})
	return out
}

// eachColonLine calls f with the colon-separated fields of each line of
// the files (those that exist).
func eachColonLine(files []string, f func(fields []string)) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f(strings.Split(strings.TrimSpace(line), ":"))
		}
	}
}

// ValidBase checks a base of the pool (0: DefaultBase).
func ValidBase(base int) error {
	if base == 0 || (base%Size == 0 && base >= Size && base <= Limit-Size) {
		return nil
	}
	return fmt.Errorf("HostIDBase %d: use a multiple of %d from %d to %d (0: %d)", base, Size, Size, Limit-Size, DefaultBase)
}
