package local

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agentbox-dev/agentbox/local/internal/cgroup"

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
	return cgroup.MemoryLimitMB(int64(si.Totalram) * int64(si.Unit) >> 20)
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

// diskReserveMB is the least space the default disk budget leaves to
// the host; it leaves 5% of the file system when that is more.
const diskReserveMB = 1 << 10

// diskBudget returns the disk budget of stateDir in MiB (budgetMB when
// set, else the default of Options.DiskBudgetMB) and what its sandboxes'
// disk images take of it (their full sizes).
func diskBudget(stateDir string, budgetMB int64) (budget, committed int64, err error) {
	imgs, _ := filepath.Glob(filepath.Join(stateDir, sandboxesDir, "*", diskImage))
	var allocated int64
	for _, img := range imgs {
		var st unix.Stat_t
		if unix.Lstat(img, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			committed += st.Size >> 20
			allocated += st.Blocks * 512 >> 20
		}
	}
	if budgetMB > 0 {
		return budgetMB, committed, nil
	}
	var fs unix.Statfs_t
	for p := stateDir; ; p = filepath.Dir(p) {
		err = unix.Statfs(p, &fs)
		if err == nil || p == "/" || !os.IsNotExist(err) {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("disk budget: statfs %s: %w", stateDir, err)
	}
	free := int64(fs.Bfree) * fs.Bsize >> 20
	reserve := max(diskReserveMB, int64(fs.Blocks)*fs.Bsize>>20/20)
	return max(free+allocated-reserve, 0), committed, nil
}

// diskLeft returns what is left of the disk budget of stateDir (see
// diskBudget), in MiB, or -1 when it cannot be known.
func diskLeft(stateDir string, budgetMB int64) int64 {
	budget, committed, err := diskBudget(stateDir, budgetMB)
	if err != nil {
		return -1
	}
	return max(budget-committed, 0)
}

// checkResources checks, before anything is created, that this host can
// enforce what r asks for explicitly, within its bounds, and that the
// disk image of the new sandbox fits the state dir's disk budget
// (budgetMB, Options.DiskBudgetMB).
func checkResources(r Resources, stateDir string, budgetMB int64) error {
	if explicitLimits(r) == 0 {
		return checkDiskBudget(hostLimits{disk: probeDisk()}, r, stateDir, budgetMB)
	}
	h := probeHost()
	if err := checkDiskBudget(h, r, stateDir, budgetMB); err != nil {
		return err
	}
	return checkResourcesOn(h, r, stateDir)
}

// checkDiskBudget checks that the disk image a new sandbox shaped by r
// would get (DiskMB, or the default, which shrinks to fit) fits what is
// left of the disk budget of stateDir.
func checkDiskBudget(h hostLimits, r Resources, stateDir string, budgetMB int64) error {
	if h.disk != nil {
		return nil // no disk image: the explicit ask fails on its own
	}
	budget, committed, err := diskBudget(stateDir, budgetMB)
	if err != nil {
		return err
	}
	want := r.DiskMiB
	if want == 0 {
		want = MinDiskMB // the smallest default
	}
	if committed+want <= budget {
		return nil
	}
	what := []any{fmt.Sprintf("a disk image of %d MiB (", want), sandbox.OptionDiskMiB, ")"}
	if r.DiskMiB == 0 {
		what = []any{fmt.Sprintf("even the smallest default disk image (%d MiB)", want)}
	}
	how := []any{sandbox.OptionDiskBudgetMB}
	if budgetMB == 0 {
		how = []any{fmt.Sprintf("the default: the space free on the state dir's file system plus what its images take, less a reserve of 5%% of it, at least %d MiB", diskReserveMB)}
	}
	parts := append(what, fmt.Sprintf(" does not fit: the state dir's sandboxes' disk images already take %d MiB (at their full sizes) of its disk budget of %d MiB (", committed, budget))
	parts = append(parts, how...)
	parts = append(parts, "); remove sandboxes, ask for a smaller ", sandbox.OptionDiskMiB, ", or raise ", sandbox.OptionDiskBudgetMB)
	return sandbox.NewOptionError(ErrDiskBudget, parts...)
}

// checkResourcesOn is checkResources on a host offering h.
func checkResourcesOn(h hostLimits, r Resources, stateDir string) error {
	ask := explicitLimits(r)
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
	if r.CPUCores > float64(h.cores) {
		return bad("CPUCores %g is more than the host's %d cores", r.CPUCores, h.cores)
	}
	if r.MemoryMiB > h.memoryMB {
		return bad("MemoryMiB %d is more than the %d MiB of memory this host gives this process", r.MemoryMiB, h.memoryMB)
	}
	if r.DiskMiB > 0 {
		free, err := freeDiskMB(stateDir)
		if err != nil {
			return err
		}
		if r.DiskMiB > free {
			return bad("DiskMiB %d is more than the %d MiB free in the state dir's file system (%s)", r.DiskMiB, free, stateDir)
		}
	}
	return nil
}

// planLimits returns the limits a sandbox shaped by r gets on this host.
// disk is the size of its image in MiB: that of the image it has, or, for
// a new sandbox (newSandbox), 0 to plan one; a sandbox made without one
// keeps its folders and has no disk limit.
//
// left is what is left of the state dir's disk budget, in MiB (diskLeft;
// negative: unknown): a default DiskMB shrinks to fit it.
func planLimits(h hostLimits, r Resources, stateDir string, disk int64, newSandbox bool, left int64) limits {
	var l limits
	var why []string
	if h.cgroups.have != 0 {
		l.Cgroup = h.cgroups.Version
	}
	if h.cgroups.have&limitCPU != 0 {
		l.CPU = r.CPUCores
		if l.CPU == 0 {
			l.CPU = defaultCPU(h.cores)
		}
	}
	if h.cgroups.have&limitMemory != 0 {
		l.MemoryMB = r.MemoryMiB
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
	case r.DiskMiB > 0:
		l.DiskMB = r.DiskMiB
	default:
		free, err := freeDiskMB(stateDir)
		if err != nil {
			why = append(why, err.Error())
			break
		}
		l.DiskMB = defaultDiskMB(free)
		for left >= 0 && l.DiskMB > left && l.DiskMB > MinDiskMB {
			l.DiskMB /= 2
		}
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
