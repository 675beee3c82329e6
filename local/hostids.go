package local

import (
	"context"
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
)

// Host ids of sandboxes started by root. Each sandbox gets a range of
// idRangeSize host uids (and the same gids) of its own, so that no two
// sandboxes share a kernel key quota, per-uid counter or file owner. The
// ranges come from a pool recorded in the state dir (hostIDsFile, guarded
// by an flock on hostIDsLock, so creators in several processes never
// take one range twice): a sandbox keeps its range while it exists,
// stopped included, so that its files stay its own; destroying it returns
// the range to the pool.
//
// The pool spans [base, hostIDLimit) in steps of idRangeSize, each range
// starting at a multiple of 65536 as systemd recommends to container
// managers (the upper 16 bits name the sandbox, the lower 16 are the uid
// inside). By default base is DefaultHostIDBase, above the ranges useradd
// hands out in /etc/subuid (100000 to 600100000 by default) and systemd's
// container ranges (524288 to 1879048191), and the search starts at a
// place derived from the state dir, so that two state dirs of one machine
// seldom meet; a range that overlaps one listed in /etc/subuid or
// /etc/subgid (for any user), or holds the id of a user in /etc/passwd or
// of a group in /etc/group, is skipped. Directory services (LDAP …) are
// not asked, for speed: where they hand out ids that high, set
// Options.HostIDBase to a free region.

const (
	// idRangeSize is how many ids a sandbox started by root has: 0 to
	// 65535 inside, the full 16-bit range (nobody, 65534, included).
	idRangeSize = 1 << 16
	// DefaultHostIDBase is the first host uid of the ranges given to
	// sandboxes started by root, unless Options.HostIDBase says otherwise:
	// 0x70000000, the start of the range systemd leaves unused between its
	// container ranges and its foreign range.
	DefaultHostIDBase = 0x70000000
	// hostIDLimit ends the pool: systemd's foreign uid range starts there,
	// and uids from 2^31 up trouble programs that take them for signed.
	hostIDLimit = 0x7FFE0000
	// legacyIDBase starts the range every sandbox started by root shared
	// before ranges were per sandbox. Those sandboxes keep it (their files
	// are owned by it); it is never given to another.
	legacyIDBase = 100000
)

// legacyIDs is the range sandboxes shared before ranges were per sandbox.
var legacyIDs = idRange{First: legacyIDBase, Count: idRangeSize}

// idPool is the content of hostIDsFile.
type idPool struct {
	// Ranges are the ranges of the state dir's sandboxes, by id.
	Ranges map[string]idRange `json:"ranges"`
}

// end returns the first id after r.
func (r idRange) end() int { return r.First + r.Count }

// overlaps reports whether r and o share an id.
func (r idRange) overlaps(o idRange) bool { return r.First < o.end() && o.First < r.end() }

// lockedPool is the pool of a state dir, read under its lock.
type lockedPool struct {
	stateDir string
	lock     *os.File
	idPool
	changed bool
}

// openPool locks the pool of stateDir and reads it. A state dir without
// a pool file (made before pools, or whose file was deleted) gets one
// listing the ranges its sandboxes' metadata records.
func openPool(ctx context.Context, stateDir string) (*lockedPool, error) {
	f, err := lockStateFile(ctx, stateDir, hostIDsLock)
	if err != nil {
		return nil, err
	}
	p := &lockedPool{stateDir: stateDir, lock: f}
	err = readJSON(filepath.Join(stateDir, hostIDsFile), &p.idPool)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Ranges, p.changed = recordedRanges(stateDir), true
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("host id pool of %s: %w; remove %s to rebuild it from the sandboxes' metadata", stateDir, err, hostIDsFile)
	case p.Ranges == nil:
		p.Ranges = map[string]idRange{}
	}
	return p, nil
}

// close writes the pool if it changed and unlocks it.
func (p *lockedPool) close() error {
	defer p.lock.Close() // releases the flock
	if !p.changed {
		return nil
	}
	if err := writeJSON(filepath.Join(p.stateDir, hostIDsFile), &p.idPool); err != nil {
		return stateDirError(p.stateDir, err)
	}
	return nil
}

// recordedRanges returns the ranges the metadata of stateDir's sandboxes
// records, by id.
func recordedRanges(stateDir string) map[string]idRange {
	out := map[string]idRange{}
	ents, _ := os.ReadDir(filepath.Join(stateDir, sandboxesDir))
	for _, e := range ents {
		if ValidateID(e.Name()) != nil {
			continue
		}
		m, err := readMeta(filepath.Join(stateDir, sandboxesDir, e.Name()))
		if err == nil && m.HostIDs != nil && m.HostIDs.Count == idRangeSize {
			out[e.Name()] = *m.HostIDs
		}
	}
	return out
}

// allocateHostIDs gives the sandbox id of stateDir a range of its own
// from the pool and returns it; the sandbox's folder must exist. A range
// the pool already gives id is returned as it is. base is
// Options.HostIDBase (0: the default).
func allocateHostIDs(ctx context.Context, stateDir, id string, base int) (idRange, error) {
	p, err := openPool(ctx, stateDir)
	if err != nil {
		return idRange{}, err
	}
	reserved := append(subIDRanges("/etc/subuid", "/etc/subgid"), userDBIDs("/etc/passwd", "/etc/group")...)
	r, err := p.allocate(id, base, reserved)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	return r, err
}

// allocate gives id a free range: see allocateHostIDs. reserved are the
// ranges to avoid besides the pool's (/etc/subuid's, users' ids).
func (p *lockedPool) allocate(id string, base int, reserved []idRange) (idRange, error) {
	if r, ok := p.Ranges[id]; ok {
		return r, nil
	}
	taken := append([]idRange{legacyIDs}, reserved...)
	for other, r := range p.Ranges {
		if p.stale(other) {
			// Its sandbox was removed without returning it (e.g. the
			// process died halfway).
			delete(p.Ranges, other)
			p.changed = true
			continue
		}
		taken = append(taken, r)
	}
	first, slots, start := poolBounds(p.stateDir, base)
	for i := range slots {
		r := idRange{First: first + (start+i)%slots*idRangeSize, Count: idRangeSize}
		if overlapsAny(r, taken) {
			continue
		}
		p.Ranges[id] = r
		p.changed = true
		return r, nil
	}
	return idRange{}, fmt.Errorf("no free host uid range for sandbox %q: the %d ranges of %d ids from %d are given to sandboxes of %s, listed in /etc/subuid or hold users' ids; remove sandboxes, or set Options.HostIDBase to a lower base", id, slots, idRangeSize, first, p.stateDir)
}

// poolBounds returns the first id of the pool of stateDir for
// Options.HostIDBase base, how many ranges it holds, and the range
// (counted from the first) where a search starts: 0 for a base of the
// caller's, else one derived from stateDir.
func poolBounds(stateDir string, base int) (first, slots, start int) {
	if base != 0 {
		return base, (hostIDLimit - base) / idRangeSize, 0
	}
	slots = (hostIDLimit - DefaultHostIDBase) / idRangeSize
	h := fnv.New32a()
	h.Write([]byte(stateDir))
	return DefaultHostIDBase, slots, int(h.Sum32() % uint32(slots))
}

func overlapsAny(r idRange, rs []idRange) bool {
	for _, o := range rs {
		if r.overlaps(o) {
			return true
		}
	}
	return false
}

// reserveHostIDs records in the pool of stateDir that the sandbox id has
// the range r, which its metadata (or, for a sandbox of the shared-range
// era, the owner of its home) says it has. It fails when another sandbox
// has an overlapping range, unless both have the shared legacy range.
func reserveHostIDs(ctx context.Context, stateDir, id string, r idRange) error {
	p, err := openPool(ctx, stateDir)
	if err != nil {
		return err
	}
	err = p.reserve(id, r)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	return err
}

func (p *lockedPool) reserve(id string, r idRange) error {
	if have, ok := p.Ranges[id]; ok && have == r {
		return nil
	}
	for _, other := range slices.Sorted(maps.Keys(p.Ranges)) {
		o := p.Ranges[other]
		if other == id || !o.overlaps(r) || (o == legacyIDs && r == legacyIDs) {
			continue
		}
		if p.stale(other) {
			delete(p.Ranges, other)
			continue
		}
		return fmt.Errorf("sandbox %q has host uids %d-%d, which sandbox %q of %s has too (its %s was edited or lost): remove one of the two sandboxes", id, r.First, r.end()-1, other, p.stateDir, hostIDsFile)
	}
	p.Ranges[id] = r
	p.changed = true
	return nil
}

// stale reports whether the range of key is left by a sandbox that no
// longer exists, or by a spare init (Pool) of a process that ended.
func (p *lockedPool) stale(key string) bool {
	if strings.HasPrefix(key, sparePrefix) {
		return !spareKeyLive(key)
	}
	_, err := os.Stat(sandboxDir(p.stateDir, key))
	return errors.Is(err, fs.ErrNotExist)
}

// claimHostIDs gives the new sandbox id the range of the spare init key
// (see Pool) and returns it.
func claimHostIDs(ctx context.Context, stateDir, key, id string) (idRange, error) {
	p, err := openPool(ctx, stateDir)
	if err != nil {
		return idRange{}, err
	}
	r, ok := p.Ranges[key]
	if ok {
		delete(p.Ranges, key)
		p.Ranges[id] = r
		p.changed = true
	}
	if err := p.close(); err != nil {
		return idRange{}, err
	}
	if !ok {
		return idRange{}, fmt.Errorf("host uid range of a spare init: not in the pool of %s (%s was edited or lost)", stateDir, hostIDsFile)
	}
	return r, nil
}

// releaseHostIDs returns the range of the removed sandbox id to the pool
// of stateDir, if it has one.
func releaseHostIDs(ctx context.Context, stateDir, id string) error {
	if _, err := os.Stat(filepath.Join(stateDir, hostIDsFile)); err != nil {
		return nil // no pool: no sandbox was started by root here
	}
	p, err := openPool(ctx, stateDir)
	if err != nil {
		return err
	}
	if _, ok := p.Ranges[id]; ok {
		delete(p.Ranges, id)
		p.changed = true
	}
	return p.close()
}

// subIDRanges returns the ranges the subordinate id files (/etc/subuid
// format: "user:first:count" lines) list, for any user.
func subIDRanges(files ...string) []idRange {
	var out []idRange
	eachColonLine(files, func(f []string) {
		if len(f) != 3 {
			return
		}
		first, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && count > 0 {
			out = append(out, idRange{First: first, Count: count})
		}
	})
	return out
}

// userDBIDs returns, as ranges of one, the ids from idRangeSize up of the
// users and groups the user database files (/etc/passwd format: the id in
// the third field) list.
func userDBIDs(files ...string) []idRange {
	var out []idRange
	eachColonLine(files, func(f []string) {
		if len(f) < 4 {
			return
		}
		if id, err := strconv.Atoi(f[2]); err == nil && id >= idRangeSize {
			out = append(out, idRange{First: id, Count: 1})
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

// validHostIDBase checks Options.HostIDBase.
func validHostIDBase(base int) error {
	if base == 0 || (base%idRangeSize == 0 && base >= idRangeSize && base <= hostIDLimit-idRangeSize) {
		return nil
	}
	return fmt.Errorf("HostIDBase %d: use a multiple of %d from %d to %d (0: %d)", base, idRangeSize, idRangeSize, hostIDLimit-idRangeSize, DefaultHostIDBase)
}
