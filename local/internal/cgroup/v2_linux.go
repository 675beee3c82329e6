package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/cgroupfile"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// On cgroup v2 every process sits in one cgroup, and the memory
// controller cannot tell the threads of one process apart: the init and
// the commands share the sandbox's memory limit (MemoryMB plus the init's
// margin), and the kernel's out-of-memory killer picks the largest process
// among them, a command in practice. The pids and cpu controllers are
// "threaded": the sandbox's cgroup is made a threaded domain with a
// threaded "cmds" cgroup below it, which the init's thread that starts
// commands joins (cgroup.threads), so that the commands' process limit
// leaves the init room for its own threads.

// newSetV2 creates the sandbox's cgroup named key in the v2
// hierarchy m, under a shared parent whose controllers it enables, and
// the commands' threaded cgroup below it, and writes the limits l.
func newSetV2(m mount, key string, l Limits) (*Set, error) {
	parent := filepath.Join(m.dir, Parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", parent, err)
	}
	enableControllersV2(m.dir, parent)
	dir := filepath.Join(parent, key)
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		_ = os.MkdirAll(parent, 0o755) // removed by a concurrent destroy
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	set := &Set{Version: 2, Paths: map[string]string{"unified": dir}}
	if l.PIDs > 0 {
		set.Commands = map[string]string{"unified": filepath.Join(dir, CommandsDir)}
		if err := mkdirCgroup(set.Commands["unified"]); err != nil {
			_ = os.Remove(dir)
			return nil, err
		}
	}
	if err := set.applyWrites(limitWritesV2(l)); err != nil {
		_ = os.Remove(filepath.Join(dir, CommandsDir))
		_ = os.Remove(dir)
		return nil, err
	}
	return set, nil
}

// limitWritesV2 returns the settings of the limits l on cgroup v2, in the
// order they must be written.
func limitWritesV2(l Limits) []cgroupWrite {
	var ws []cgroupWrite
	if l.MemoryMB > 0 {
		// Swap would stretch the limit: the sandbox gets none.
		ws = append(ws,
			cgroupWrite{"", false, "memory.max", mib(l.MemoryMB + InitMemoryMB)},
			cgroupWrite{"", false, "memory.swap.max", "0"})
	}
	if l.PIDs > 0 {
		ws = append(ws,
			cgroupWrite{"", false, "pids.max", strconv.FormatInt(2*l.PIDs+InitPIDs, 10)},
			// A threaded child makes the sandbox's cgroup a threaded
			// domain, which may then hold the init and enable threaded
			// controllers for its children.
			cgroupWrite{"", true, "cgroup.type", "threaded"},
			cgroupWrite{"", false, "cgroup.subtree_control", "+pids"},
			cgroupWrite{"", true, "pids.max", strconv.FormatInt(l.PIDs, 10)})
	}
	if l.CPU > 0 {
		ws = append(ws,
			cgroupWrite{"", false, "cpu.max", fmt.Sprintf("%d %d", int64(l.CPU*cfsPeriod), cfsPeriod)},
			cgroupWrite{"", false, "cpu.weight", strconv.FormatInt(cpuWeight(l.CPU), 10)})
	}
	return ws
}

// cpuWeight returns the v2 CPU weight of cpu cores: the v1 shares scaled
// to v2's default of 100 (1024 shares), within the kernel's bounds.
func cpuWeight(cpu float64) int64 {
	return min(max(cpuShares(cpu)*100/1024, 1), 10000)
}

// enableControllersV2 enables, for the children of root and of parent, the
// controllers we use that root offers; failures only cost accounting.
func enableControllersV2(root, parent string) {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return
	}
	var enable []string
	for _, c := range strings.Fields(string(b)) {
		if c == "memory" || c == "pids" || c == "cpu" {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return
	}
	line := []byte(strings.Join(enable, " "))
	_ = os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), line, 0)
	_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), line, 0)
}

// OpenV2 opens the v2 cgroup of the set, for the init to be cloned
// straight into it (CLONE_INTO_CGROUP). It returns nil for a v1 set or
// none: the host then moves the init after the fork.
func (s *Set) OpenV2() *os.File {
	if s == nil || s.Version != 2 {
		return nil
	}
	f, err := os.Open(s.Paths["unified"])
	if err != nil {
		return nil
	}
	return f
}

// killCgroupV2 kills every process of the v2 cgroup folder d, and of its
// children, at once.
func killCgroupV2(d string) {
	_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
}

// resourcesV2 reads the limits and usage of the v2 cgroup folder d.
func resourcesV2(d string) *sandbox.Usage {
	r := newResources()
	if n, ok := cgroupfile.ReadInt(filepath.Join(d, "memory.current")); ok {
		r.MemoryUsedMB = bytesToMB(n, true)
	}
	if n, ok := cgroupfile.ReadInt(filepath.Join(d, "memory.max")); ok {
		r.MemoryMB = bytesToMB(n, false) - InitMemoryMB
	}
	if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
		var q, p int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &q, &p); err == nil && q > 0 && p > 0 {
			r.CPUCores = float64(q) / float64(p)
		}
	}
	return r
}
