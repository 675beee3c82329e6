package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentbox-dev/agentbox/internal/cgroupfile"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// On cgroup v1 each controller has a hierarchy of its own (or shares one
// with others), and the threads of one process may sit in different
// cgroups: the init's threads stay in the sandbox's cgroup, while its
// thread that starts commands joins a "cmds" cgroup below it in the memory
// and pids hierarchies, so that every command is born there. The
// commands' memory and process limits are those of "cmds"; the sandbox's
// cgroup allows the init a margin on top (InitMemoryMB, InitPIDs), and an
// out-of-memory kill in "cmds" only considers the commands (the kernel
// scans the processes whose leader is in the cgroup; the init's leader is
// not). The CPU quota and weight apply to the sandbox's cgroup as a whole.

// newSetV1 creates the sandbox's cgroup named key in each v1
// hierarchy of mounts, below this process's own cgroup there, and the
// commands' cgroups below it, and writes the limits l.
func newSetV1(mounts []mount, key string, l Limits) (*Set, error) {
	own := ownCgroups()
	set := &Set{Version: 1, Paths: map[string]string{}, Commands: map[string]string{}}
	for _, m := range mounts {
		dir := filepath.Join(m.dir, own[m.controllers[0]], Parent, key)
		if err := mkdirCgroup(dir); err != nil {
			set.Destroy(context.Background())
			return nil, err
		}
		for _, c := range m.controllers {
			set.Paths[c] = dir
			if c == "memory" || c == "pids" {
				set.Commands[c] = filepath.Join(dir, CommandsDir)
			}
		}
	}
	for _, d := range set.Commands {
		if err := mkdirCgroup(d); err != nil {
			set.Destroy(context.Background())
			return nil, err
		}
	}
	_, memsw := os.Stat(filepath.Join(set.Paths["memory"], "memory.memsw.limit_in_bytes"))
	if err := set.applyWrites(limitWritesV1(l, memsw == nil)); err != nil {
		set.Destroy(context.Background())
		return nil, err
	}
	return set, nil
}

// limitWritesV1 returns the settings of the limits l on cgroup v1, in the
// order they must be written; memsw says whether the host accounts swap
// (memory.memsw.*), which then counts against the same limit.
func limitWritesV1(l Limits, memsw bool) []cgroupWrite {
	var ws []cgroupWrite
	if l.MemoryMB > 0 {
		// memsw may never be below the memory limit: raise the memory
		// limit first (both start unlimited).
		for _, c := range []struct {
			cmds bool
			mb   int64
		}{{false, l.MemoryMB + InitMemoryMB}, {true, l.MemoryMB}} {
			ws = append(ws, cgroupWrite{"memory", c.cmds, "memory.limit_in_bytes", mib(c.mb)})
			if memsw {
				ws = append(ws, cgroupWrite{"memory", c.cmds, "memory.memsw.limit_in_bytes", mib(c.mb)})
			}
		}
	}
	if l.PIDs > 0 {
		ws = append(ws,
			cgroupWrite{"pids", false, "pids.max", strconv.FormatInt(2*l.PIDs+InitPIDs, 10)},
			cgroupWrite{"pids", true, "pids.max", strconv.FormatInt(l.PIDs, 10)})
	}
	if l.CPU > 0 {
		ws = append(ws,
			cgroupWrite{"cpu", false, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)},
			cgroupWrite{"cpu", false, "cpu.cfs_quota_us", strconv.FormatInt(int64(l.CPU*cfsPeriod), 10)},
			cgroupWrite{"cpu", false, "cpu.shares", strconv.FormatInt(cpuShares(l.CPU), 10)})
	}
	return ws
}

// resourcesV1 reads the limits and usage of the v1 cgroups paths
// (controller → folder).
func resourcesV1(paths map[string]string) *sandbox.Usage {
	r := newResources()
	if d, ok := paths["memory"]; ok {
		if n, ok := cgroupfile.ReadInt(filepath.Join(d, "memory.usage_in_bytes")); ok {
			r.MemoryUsedMB = bytesToMB(n, true)
		}
		if n, ok := cgroupfile.ReadInt(filepath.Join(d, CommandsDir, "memory.limit_in_bytes")); ok && n < 1<<50 {
			r.MemoryMB = bytesToMB(n, false)
		}
	}
	if d, ok := paths["cpu"]; ok {
		q, ok1 := cgroupfile.ReadInt(filepath.Join(d, "cpu.cfs_quota_us"))
		p, ok2 := cgroupfile.ReadInt(filepath.Join(d, "cpu.cfs_period_us"))
		if ok1 && ok2 && q > 0 && p > 0 {
			r.CPUCores = float64(q) / float64(p)
		}
	}
	return r
}
