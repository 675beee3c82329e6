package local

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// hostLimits is what this host offers a sandbox's limits.
type hostLimits struct {
	cores    int
	memoryMB int64 // the memory this process may use
	cgroups  cgroupHost
	disk     error // nil when disk images work, else why not
}

// probeHost finds what this host offers a sandbox's limits.
func probeHost() hostLimits {
	return hostLimits{cores: runtime.NumCPU(), memoryMB: usableMemoryMB(), cgroups: probeCgroups(), disk: probeDisk()}
}

// usableMemoryMB returns the memory this process may use: the host's,
// or its own memory cgroup's limit when lower.
func usableMemoryMB() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	total := int64(si.Totalram) * int64(si.Unit) >> 20
	own := ownCgroups()
	if mounts, err := cgroupMounts(); err == nil {
		for _, m := range mounts {
			file, path := "memory.limit_in_bytes", own["memory"]
			if m.v2 {
				file, path = "memory.max", own[""]
			} else if !strings.Contains(","+strings.Join(m.controllers, ",")+",", ",memory,") {
				continue
			}
			if n, ok := readInt(filepath.Join(m.dir, path, file)); ok && n>>20 < total {
				total = n >> 20
			}
		}
	}
	return total
}

// freeDiskMB returns the space free for root on the file system of
// stateDir (or of its nearest existing parent).
func freeDiskMB(stateDir string) (int64, error) {
	for p := stateDir; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return int64(st.Bfree) * st.Bsize >> 20, nil
		}
		if p == "/" || !os.IsNotExist(err) {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
	}
}

// checkResources checks, before anything is created, that this host can
// enforce what r asks for explicitly, within its bounds.
func checkResources(r Resources, stateDir string) error {
	if r.explicit() == 0 {
		return nil
	}
	return checkResourcesOn(probeHost(), r, stateDir)
}

// checkResourcesOn is checkResources on a host offering h.
func checkResourcesOn(h hostLimits, r Resources, stateDir string) error {
	ask := r.explicit()
	var off limitSet
	var why []string
	if miss := ask & (limitCPU | limitMemory | limitPIDs) &^ h.cgroups.have; miss != 0 {
		off |= miss
		why = append(why, h.cgroups.why)
	}
	if ask&limitDisk != 0 && h.disk != nil {
		off |= limitDisk
		why = append(why, h.disk.Error())
	}
	if off != 0 {
		return fmt.Errorf("%w: Resources asks for a %s limit, which this host cannot enforce: %s; leave the field 0 for best effort", ErrLimitUnavailable, orList(off.names()), strings.Join(why, "; "))
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Resources: %s", sandbox.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if r.CPU > float64(h.cores) {
		return bad("CPU %g is more than the host's %d cores", r.CPU, h.cores)
	}
	if r.MemoryMB > h.memoryMB {
		return bad("MemoryMB %d is more than the %d MiB of memory this host gives this process", r.MemoryMB, h.memoryMB)
	}
	if r.DiskMB > 0 {
		free, err := freeDiskMB(stateDir)
		if err != nil {
			return err
		}
		if r.DiskMB > free {
			return bad("DiskMB %d is more than the %d MiB free in the state dir's file system (%s)", r.DiskMB, free, stateDir)
		}
	}
	return nil
}

// planLimits returns the limits a sandbox shaped by r gets on this host.
// disk is the size of its image in MiB: that of the image it has, or, for
// a new sandbox (newSandbox), 0 to plan one; a sandbox made without one
// keeps its folders and has no disk limit.
func planLimits(h hostLimits, r Resources, stateDir string, disk int64, newSandbox bool) limits {
	var l limits
	var why []string
	if h.cgroups.have != 0 {
		l.Cgroup = h.cgroups.version
	}
	if h.cgroups.have&limitCPU != 0 {
		l.CPU = r.CPU
		if l.CPU == 0 {
			l.CPU = defaultCPU(h.cores)
		}
	}
	if h.cgroups.have&limitMemory != 0 {
		l.MemoryMB = r.MemoryMB
		if l.MemoryMB == 0 {
			l.MemoryMB = max(h.memoryMB/4, MinMemoryMB)
		}
	}
	if h.cgroups.have&limitPIDs != 0 {
		l.PIDs = r.PIDs
		if l.PIDs == 0 {
			l.PIDs = DefaultPIDs
		}
	}
	if h.cgroups.why != "" {
		why = append(why, h.cgroups.why)
	}
	switch {
	case disk > 0:
		l.DiskMB = disk
	case !newSandbox:
		why = append(why, "the sandbox was created without a disk image")
	case h.disk != nil:
		why = append(why, h.disk.Error())
	case r.DiskMB > 0:
		l.DiskMB = r.DiskMB
	default:
		free, err := freeDiskMB(stateDir)
		if err != nil {
			why = append(why, err.Error())
			break
		}
		l.DiskMB = defaultDiskMB(free)
	}
	l.Why = strings.Join(why, "; ")
	return l
}

// defaultCPU returns the default CPU on a host of cores cores: all but
// one, at least one. A sandbox alone, busy on every thread, leaves a core
// to the host (the engine, serve, sshd, the other sandboxes' inits).
func defaultCPU(cores int) float64 { return float64(max(1, cores-1)) }

// defaultDiskMB returns the default DiskMB on a file system with free MiB
// free: a quarter of it, rounded down to a power of two (so that a few
// sizes, each formatted once, serve every sandbox), within bounds.
func defaultDiskMB(free int64) int64 {
	mb := int64(MinDiskMB)
	for mb*2 <= min(free/4, maxDefaultDiskMB) {
		mb *= 2
	}
	return mb
}
