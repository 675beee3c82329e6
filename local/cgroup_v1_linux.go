package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// newCgroupSetV1 creates the sandbox's cgroup named key in each v1
// hierarchy of mounts, below this process's own cgroup there.
func newCgroupSetV1(mounts []cgroupMount, key string) (*cgroupSet, error) {
	own := ownCgroups()
	set := &cgroupSet{Version: 1, Paths: map[string]string{}}
	for _, m := range mounts {
		dir := filepath.Join(m.dir, own[m.controllers[0]], cgroupParent, key)
		err := os.MkdirAll(dir, 0o755)
		if errors.Is(err, os.ErrNotExist) {
			err = os.MkdirAll(dir, 0o755) // the parent was removed by a concurrent destroy
		}
		if err != nil {
			set.destroy(context.Background())
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, c := range m.controllers {
			set.Paths[c] = dir
		}
	}
	if len(set.Paths) == 0 {
		return nil, nil
	}
	return set, nil
}

// resourcesV1 reads the limits and usage of the v1 cgroups paths
// (controller → folder).
func resourcesV1(paths map[string]string) *sandbox.Resources {
	r := newResources()
	if d, ok := paths["memory"]; ok {
		if n, ok := readInt(filepath.Join(d, "memory.usage_in_bytes")); ok {
			r.MemoryUsedMB = bytesToMB(n, true)
		}
		if n, ok := readInt(filepath.Join(d, "memory.limit_in_bytes")); ok && n < 1<<50 {
			r.MemoryMB = bytesToMB(n, false)
		}
	}
	if d, ok := paths["cpu"]; ok {
		q, ok1 := readInt(filepath.Join(d, "cpu.cfs_quota_us"))
		p, ok2 := readInt(filepath.Join(d, "cpu.cfs_period_us"))
		if ok1 && ok2 && q > 0 && p > 0 {
			r.CPUCores = float64(q) / float64(p)
		}
	}
	return r
}
