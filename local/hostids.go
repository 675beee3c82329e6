package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/local/internal/hostids"
)

// Host ids of sandboxes started by root: each sandbox gets a range of
// its own from the pool of its state dir (package hostids), recorded in
// hostIDsFile under an flock on hostIDsLock. The keys of the pool are
// sandbox ids, and the keys of spare inits (Pool, sparePrefix); a range
// whose sandbox folder is gone, or whose spare's process has ended, is
// taken back.

// idRange is a range of host uids (and the same gids), as meta.json
// records it.
type idRange = hostids.Range

const (
	// idRangeSize is how many ids a sandbox started by root has.
	idRangeSize = hostids.Size
	// DefaultHostIDBase is the first host uid of the ranges given to
	// sandboxes started by root, unless Options.HostIDBase says otherwise:
	// 0x70000000, the start of the range systemd leaves unused between its
	// container ranges and its foreign range.
	DefaultHostIDBase = hostids.DefaultBase
	// hostIDLimit ends the pool.
	hostIDLimit = hostids.Limit
	// legacyIDBase starts the range every sandbox started by root shared
	// before ranges were per sandbox.
	legacyIDBase = hostids.LegacyBase
)

// legacyIDs is the range sandboxes shared before ranges were per sandbox.
var legacyIDs = hostids.Legacy

// hostIDPool returns the pool of host id ranges of stateDir.
func hostIDPool(stateDir string) *hostids.Pool {
	return &hostids.Pool{
		Name: stateDir,
		File: filepath.Join(stateDir, hostIDsFile),
		Lock: func(ctx context.Context) (*os.File, error) {
			return lockStateFile(ctx, stateDir, hostIDsLock)
		},
		Stale:      func(key string) bool { return staleRange(stateDir, key) },
		Seed:       func() map[string]idRange { return recordedRanges(stateDir) },
		WriteError: func(err error) error { return stateDirError(stateDir, err) },
	}
}

// staleRange reports whether the range of key is left by a sandbox that
// no longer exists, or by a spare init (Pool) of a process that ended.
func staleRange(stateDir, key string) bool {
	if strings.HasPrefix(key, sparePrefix) {
		return !spareKeyLive(key)
	}
	_, err := os.Stat(sandboxDir(stateDir, key))
	return errors.Is(err, fs.ErrNotExist)
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
	return hostIDPool(stateDir).Allocate(ctx, id, base)
}

// reserveHostIDs records in the pool of stateDir that the sandbox id has
// the range r, which its metadata (or, for a sandbox of the shared-range
// era, the owner of its home) says it has. It fails when another sandbox
// has an overlapping range, unless both have the shared legacy range.
func reserveHostIDs(ctx context.Context, stateDir, id string, r idRange) error {
	return hostIDPool(stateDir).Reserve(ctx, id, r)
}

// claimHostIDs gives the new sandbox id the range of the spare init key
// (see Pool) and returns it.
func claimHostIDs(ctx context.Context, stateDir, key, id string) (idRange, error) {
	return hostIDPool(stateDir).Claim(ctx, key, id)
}

// releaseHostIDs returns the range of the removed sandbox id to the pool
// of stateDir, if it has one.
func releaseHostIDs(ctx context.Context, stateDir, id string) error {
	return hostIDPool(stateDir).Release(ctx, id)
}

// validHostIDBase checks Options.HostIDBase.
func validHostIDBase(base int) error { return hostids.ValidBase(base) }
