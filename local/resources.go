package local

import (
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Resources limits what a sandbox's commands may use: the engine-neutral
// [sandbox.Resources], whose fields mean, for this engine:
//
//   - CPUCores is the sandbox's share of the host's processors, in cores
//     (fractions allowed, at least 0.01): a CFS quota of CPUCores × 100 ms
//     of CPU time every 100 ms, and a weight of CPUCores × 1024 shares
//     (cgroup v1; the same proportion of cgroup v2's default weight of
//     100) against the other sandboxes. Default: the host's core count
//     minus one, at least one (1 on a host of 1 or 2 cores, 7 on 8): a
//     sandbox alone, busy on every thread, leaves a core to the host. The
//     sandboxes' cgroups all sit in one "agentbox" cgroup of the default
//     weight, which under contention weighs as much as one busy process of
//     the engine's own cgroup, so sandboxes together cannot starve the
//     host either. At most the host's core count.
//   - MemoryMiB is the memory of the sandbox's commands: their anonymous
//     memory, page cache (files written in /tmp and /dev/shm included) and
//     kernel memory. A command that allocates beyond it is killed by the
//     kernel's out-of-memory killer (exit code 137); the sandbox's init,
//     which serves the toolbox API, has up to 64 MiB of its own besides
//     and is not a candidate (on cgroup v2, whose memory controller cannot
//     tell the init's threads apart, the init and the commands share
//     MemoryMiB + 64 MiB, and the killer takes the largest process, a
//     command in practice). With swap on the host, cgroup v1 counts swap
//     against the same limit and v2 gives the sandbox none. Default: a
//     quarter of the memory this process may use (the host's, or less when
//     its own cgroup is limited): room for the host and a few busy
//     sandboxes. At least 64 MiB (less cannot run a shell and a package
//     manager side by side; a smaller value is most likely GiB mistaken
//     for MiB), at most that memory.
//   - DiskMiB is the size of the file system holding everything the
//     sandbox writes but its volumes: the home, /tmp, the working
//     directory and the toolbox's logs. A writer beyond it (or beyond its
//     inodes, one per 16 KiB) gets ENOSPC; the host's file system is never
//     filled. It is a sparse ext4 image in the sandbox's state folder, so
//     it takes only the space its files use, and its size is fixed when
//     the sandbox is created. Default: a quarter of the space free on the
//     state dir's file system at creation (so that one sandbox cannot fill
//     it), rounded down to a power of two, at most 4 GiB (Daytona's
//     default is 3 GiB), halved while it does not fit what is left of the
//     state dir's disk budget ([Options.DiskBudgetMB]), which counts every
//     image at its full size. At least 64 MiB, at most that free space.
//   - PIDs is the number of processes and threads the sandbox's commands
//     may have at once; a fork beyond it fails (EAGAIN). The init's own
//     threads (a few, plus one per running command) are counted apart.
//     Default: 1024, plenty for builds and language servers, and a small
//     fraction of the host's pid space (a fork bomb stops there).
//
// Every field's zero value means its default, and the zero Resources asks
// for the defaults on a best-effort basis: each default that this host
// cannot enforce is left off, and Info (Limits) and Instructions say
// which. A field set to a non-zero value is an explicit request: New
// fails, before anything is created, with an error matching
// [ErrLimitUnavailable] when this host cannot enforce it, and with one
// matching [sandbox.ErrInvalidArgument] when the value is out of range.
//
// Limits need root: CPU, memory and process counts are enforced by the
// sandbox's cgroups (v1 or v2), the disk by a file system image of its
// own. A non-root engine enforces none of them.
type Resources = sandbox.Resources

// Bounds and defaults of [Resources].
const (
	DefaultPIDs = 1024
	// MinMemoryMB and MinDiskMB are the smallest MemoryMiB and DiskMiB.
	MinMemoryMB = 64
	MinDiskMB   = 64
	// MinCPU is the smallest CPUCores: the kernel's smallest quota, 1 ms per
	// 100 ms period.
	MinCPU = 0.01
	// maxDefaultDiskMB caps the default DiskMB. The disk budget counts
	// images at their full sizes, so the default decides how many default
	// sandboxes a host holds: 4 GiB lets 50 of them share 200 GiB.
	maxDefaultDiskMB = 4 << 10
)

// ErrLimitUnavailable reports that a limit asked for explicitly in
// [Resources] cannot be enforced on this host (not root, no cgroup
// controller for it, no loop devices or ext4). It matches
// [sandbox.ErrIsolationUnavailable] too.
var ErrLimitUnavailable = fmt.Errorf("%w: resource limit unavailable", sandbox.ErrIsolationUnavailable)

// ErrDiskBudget reports that a new sandbox's disk image does not fit what
// is left of its state dir's disk budget ([Options.DiskBudgetMB]). It
// matches [sandbox.ErrInvalidArgument] too.
var ErrDiskBudget = fmt.Errorf("%w: disk budget exceeded", sandbox.ErrInvalidArgument)

// normalizeResources validates r, with sandbox's validator and this
// engine's bounds, without looking at the host (New checks the host's
// bounds and means, checkResources).
func normalizeResources(r Resources) (Resources, error) {
	if err := r.Validate(); err != nil {
		return r, err
	}
	bad := func(format string, args ...any) (Resources, error) {
		return r, fmt.Errorf("%w: Resources: %s", sandbox.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case r.CPUCores != 0 && r.CPUCores < MinCPU:
		return bad("CPUCores %g is below %g cores (1 ms of CPU time per 100 ms)", r.CPUCores, MinCPU)
	case r.MemoryMiB != 0 && r.MemoryMiB < MinMemoryMB:
		return bad("MemoryMiB %d is below %d MiB, too little to run a shell and a tool; the unit is MiB (1 GiB = 1024)", r.MemoryMiB, MinMemoryMB)
	case r.DiskMiB != 0 && r.DiskMiB < MinDiskMB:
		return bad("DiskMiB %d is below %d MiB; the unit is MiB (1 GiB = 1024)", r.DiskMiB, MinDiskMB)
	}
	return r, nil
}

// limitSet names the kinds of limit.
type limitSet uint8

const (
	limitCPU limitSet = 1 << iota
	limitMemory
	limitPIDs
	limitDisk
	allLimits = limitCPU | limitMemory | limitPIDs | limitDisk
)

// names lists the kinds of s, as Info's Note and errors name them.
func (s limitSet) names() []string {
	var out []string
	for _, k := range []struct {
		bit  limitSet
		name string
	}{{limitCPU, "CPU"}, {limitMemory, "memory"}, {limitPIDs, "process-count"}, {limitDisk, "disk"}} {
		if s&k.bit != 0 {
			out = append(out, k.name)
		}
	}
	return out
}

// explicitLimits returns the kinds r asks for explicitly.
func explicitLimits(r Resources) limitSet {
	var s limitSet
	if r.CPUCores != 0 {
		s |= limitCPU
	}
	if r.MemoryMiB != 0 {
		s |= limitMemory
	}
	if r.PIDs != 0 {
		s |= limitPIDs
	}
	if r.DiskMiB != 0 {
		s |= limitDisk
	}
	return s
}

// limits are the limits a sandbox gets: a zero field is not enforced, and
// why says why not.
type limits struct {
	CPU      float64 `json:"cpu,omitempty"`
	MemoryMB int64   `json:"memoryMB,omitempty"`
	PIDs     int64   `json:"pids,omitempty"`
	DiskMB   int64   `json:"diskMB,omitempty"`
	// Cgroup is the cgroup version enforcing CPU, memory and PIDs (0:
	// none).
	Cgroup int `json:"cgroup,omitempty"`
	// Why says why the limits not enforced are not.
	Why string `json:"why,omitempty"`
}

// addWhy adds why to the reasons of the limits l does not enforce.
func (l *limits) addWhy(why string) {
	if l.Why != "" {
		why = l.Why + "; " + why
	}
	l.Why = why
}

// unenforced returns the kinds l does not enforce.
func (l *limits) unenforced() limitSet {
	var s limitSet
	if l.CPU == 0 {
		s |= limitCPU
	}
	if l.MemoryMB == 0 {
		s |= limitMemory
	}
	if l.PIDs == 0 {
		s |= limitPIDs
	}
	if l.DiskMB == 0 {
		s |= limitDisk
	}
	return s
}

// info returns l as Info reports it.
func (l *limits) info() *sandbox.Limits {
	return &sandbox.Limits{CPUCores: l.CPU, MemoryMB: l.MemoryMB, Processes: l.PIDs, DiskMB: l.DiskMB, Note: l.note()}
}

// note says in words what l enforces, how, and what not.
func (l *limits) note() string {
	var parts []string
	if l.Cgroup != 0 {
		var kinds []string
		if l.CPU != 0 {
			kinds = append(kinds, "CPU quota and weight")
		}
		if l.MemoryMB != 0 {
			kinds = append(kinds, "memory (out-of-memory kills the command, exit 137)")
		}
		if l.PIDs != 0 {
			kinds = append(kinds, "process count")
		}
		parts = append(parts, fmt.Sprintf("cgroup v%d enforces %s for every process of the sandbox, background and daemonised ones included", l.Cgroup, strings.Join(kinds, ", ")))
	}
	if l.DiskMB != 0 {
		parts = append(parts, "a sparse ext4 image of its own holds the home, /tmp, the working directory and the toolbox's logs (ENOSPC beyond its size or inodes); volumes are not size-limited")
	}
	if off := l.unenforced(); off != 0 {
		msg := "no " + orList(off.names()) + " limit"
		if l.Why != "" {
			msg += ": " + l.Why
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// instructions tells an agent the sandbox's limits.
func (l *limits) instructions() string {
	var have []string
	if l.CPU != 0 {
		have = append(have, fmt.Sprintf("%g CPU cores", l.CPU))
	}
	if l.MemoryMB != 0 {
		have = append(have, fmt.Sprintf("%d MiB of memory (a command using more is killed, exit code 137)", l.MemoryMB))
	}
	if l.PIDs != 0 {
		have = append(have, fmt.Sprintf("%d processes and threads", l.PIDs))
	}
	if l.DiskMB != 0 {
		have = append(have, fmt.Sprintf("%d MiB of disk for the home, /tmp and the working directory together", l.DiskMB))
	}
	var out []string
	if len(have) > 0 {
		out = append(out, "Limits: "+strings.Join(have, ", ")+".")
	}
	if off := l.unenforced(); off != 0 {
		out = append(out, "No "+orList(off.names())+" limit is enforced.")
	}
	return strings.Join(out, " ")
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
