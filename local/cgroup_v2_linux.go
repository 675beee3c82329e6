package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// newCgroupSetV2 creates the sandbox's cgroup named key in the v2
// hierarchy m, under a shared parent whose controllers it enables.
func newCgroupSetV2(m cgroupMount, key string) (*cgroupSet, error) {
	parent := filepath.Join(m.dir, cgroupParent)
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
	return &cgroupSet{Version: 2, Paths: map[string]string{"unified": dir}}, nil
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

// openV2 opens the v2 cgroup of the set, for the init to be cloned
// straight into it (CLONE_INTO_CGROUP). It returns nil for a v1 set or
// none: the host then moves the init after the fork.
func (s *cgroupSet) openV2() *os.File {
	if s == nil || s.Version != 2 {
		return nil
	}
	f, err := os.Open(s.Paths["unified"])
	if err != nil {
		return nil
	}
	return f
}

// killCgroupV2 kills every process of the v2 cgroup folder d at once.
func killCgroupV2(d string) {
	_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
}

// resourcesV2 reads the limits and usage of the v2 cgroup folder d.
func resourcesV2(d string) *sandbox.Resources {
	r := newResources()
	if n, ok := readInt(filepath.Join(d, "memory.current")); ok {
		r.MemoryUsedMB = bytesToMB(n, true)
	}
	if n, ok := readInt(filepath.Join(d, "memory.max")); ok {
		r.MemoryMB = bytesToMB(n, false)
	}
	if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
		var q, p int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &q, &p); err == nil && q > 0 && p > 0 {
			r.CPUCores = float64(q) / float64(p)
		}
	}
	return r
}
