package sandbox

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resources are the resource limits a sandbox is created with, the same
// for every engine: units are in the names. A zero field asks for the
// engine's default. Engines convert at their edges (Daytona's API takes
// whole cores and GiB).
type Resources struct {
	// CPUCores is the sandbox's share of the host's processors, in cores
	// (fractions allowed where the engine allows them).
	CPUCores float64 `json:"cpuCores,omitempty"`
	// MemoryMiB is the memory of the sandbox's commands, in MiB (2^20
	// bytes; 1 GiB is 1024).
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// DiskMiB is the size of the sandbox's writable disk, in MiB.
	DiskMiB int64 `json:"diskMiB,omitempty"`
	// PIDs is the number of processes and threads the sandbox's commands
	// may have at once.
	PIDs int64 `json:"pids,omitempty"`
}

// Validate returns an error matching ErrInvalidArgument, naming the
// field, when a field of r is negative or CPUCores is not a finite
// number. The bounds of an engine (a least memory, the host's cores) are
// its own to check.
func (r Resources) Validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: Resources.%s %v is negative; use 0 for the engine's default", ErrInvalidArgument, field, v)
	}
	switch {
	case math.IsNaN(r.CPUCores) || math.IsInf(r.CPUCores, 0):
		return fmt.Errorf("%w: Resources.CPUCores %v is not a number of cores", ErrInvalidArgument, r.CPUCores)
	case r.CPUCores < 0:
		return bad("CPUCores", r.CPUCores)
	case r.MemoryMiB < 0:
		return bad("MemoryMiB", r.MemoryMiB)
	case r.DiskMiB < 0:
		return bad("DiskMiB", r.DiskMiB)
	case r.PIDs < 0:
		return bad("PIDs", r.PIDs)
	}
	return nil
}

// ParseCPUCores parses a number of cores: "2", "0.5". It must be
// positive and finite. The error matches ErrInvalidArgument.
func ParseCPUCores(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("%w: %q is not a number of CPU cores such as 2 or 0.5", ErrInvalidArgument, s)
	}
	return v, nil
}

// sizeUnits are the units ParseSizeMiB reads, in MiB.
var sizeUnits = []struct {
	suffix string
	mib    float64
}{{"tib", 1 << 20}, {"gib", 1 << 10}, {"mib", 1}}

// ParseSizeMiB parses a size in MiB: a plain number of MiB ("512"), or a
// number with the unit MiB, GiB or TiB ("512MiB", "2GiB", "1.5GiB"; case
// does not matter). Decimal units (MB, GB) and bare letters (M, G) are
// refused as ambiguous. It must be positive and a whole number of MiB.
// The error matches ErrInvalidArgument.
func ParseSizeMiB(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, scale = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mib
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %q is not a size such as 512 (MiB), 512MiB or 2GiB (binary units: MB, GB, M and G are ambiguous)", ErrInvalidArgument, s)
	}
	mib := v * scale
	if mib <= 0 || mib != math.Trunc(mib) || mib > math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: size %q is not a positive whole number of MiB", ErrInvalidArgument, s)
	}
	return int64(mib), nil
}

// ParsePIDs parses a positive count of processes. The error matches
// ErrInvalidArgument.
func ParsePIDs(s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%w: %q is not a positive number of processes", ErrInvalidArgument, s)
	}
	return v, nil
}

// GiB returns mib in GiB, and whether it is a whole number of them: the
// unit of Daytona's API.
func GiB(mib int64) (gib int64, whole bool) {
	return mib >> 10, mib&(1<<10-1) == 0
}
