package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// cgroupParent names the folder, in each hierarchy, that holds the
// sandboxes' cgroups.
const cgroupParent = "agentbox"

// cgroupKey names the cgroups of a sandbox, unique per state dir: an FNV-1a
// hash of the state dir, then the id.
func cgroupKey(stateDir, id string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(stateDir); i++ {
		h = (h ^ uint32(stateDir[i])) * 16777619
	}
	return fmt.Sprintf("%08x-%s", h, id)
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	dir         string
	v2          bool
	controllers []string // v1: the controllers we use that it offers
}

// cgroupMounts lists the cgroup2 hierarchy and the v1 hierarchies offering
// a controller we use (memory, pids).
func cgroupMounts() ([]cgroupMount, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var out []cgroupMount
	for _, m := range mounts {
		switch m.fsType {
		case "cgroup2":
			out = append(out, cgroupMount{dir: m.mountPoint, v2: true})
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(m.superOptions, ",") {
				switch o {
				case "memory", "pids":
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) > 0 {
				out = append(out, cgroupMount{dir: m.mountPoint, controllers: ctrls})
			}
		}
	}
	return out, nil
}

// ownCgroups maps v1 controller names (and "" for v2) to this process's
// cgroup path.
func ownCgroups() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m
}

// newCgroupSet creates the cgroups of a sandbox named key: v1 ones when
// the host mounts any v1 hierarchy we use (a hybrid host accounts there),
// else a v2 one. It returns nil (no error) when this host offers no cgroups
// we may use, e.g. when not running as root: the sandbox then relies on its
// pid namespace alone.
func newCgroupSet(key string) (*cgroupSet, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, nil
	}
	var v1 []cgroupMount
	var v2 *cgroupMount
	for i, m := range mounts {
		if m.v2 {
			v2 = &mounts[i]
		} else {
			v1 = append(v1, m)
		}
	}
	switch {
	case len(v1) > 0:
		return newCgroupSetV1(v1, key)
	case v2 != nil:
		return newCgroupSetV2(*v2, key)
	}
	return nil, nil
}

// add moves pid (with all its threads) into every cgroup of the set.
func (s *cgroupSet) add(pid int) error {
	for _, d := range s.dirs() {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("place sandbox init in cgroup %s: %w", d, err)
		}
	}
	return nil
}

// destroy kills every process left in the set and removes its folders.
func (s *cgroupSet) destroy(ctx context.Context) error {
	if s == nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range s.dirs() {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if s.Version == 2 {
			killCgroupV2(d)
		}
		if err := emptyAndRemove(ctx, d, deadline); err != nil {
			return err
		}
	}
	return nil
}

// emptyAndRemove kills the processes of the cgroup folder d until it can
// remove d, then removes the shared parent too once it is empty (it is
// busy, and stays, while other sandboxes run).
func emptyAndRemove(ctx context.Context, d string, deadline time.Time) error {
	for {
		pids := readPids(d)
		if len(pids) == 0 {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				if p := filepath.Dir(d); filepath.Base(p) == cgroupParent {
					_ = syscall.Rmdir(p)
				}
				return nil
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cgroup %s: %d processes survive SIGKILL", d, len(pids))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// resources reads the limits and usage of the set.
func (s *cgroupSet) resources() *sandbox.Resources {
	if s.Version == 1 {
		return resourcesV1(s.Paths)
	}
	return resourcesV2(s.Paths["unified"])
}

// newResources returns the resources of a sandbox without limits.
func newResources() *sandbox.Resources {
	return &sandbox.Resources{CPUCores: float64(runtime.NumCPU())}
}

// bytesToMB converts a byte count to MB, rounding up when up.
func bytesToMB(n int64, up bool) int64 {
	const mb = 1 << 20
	if up {
		return (n + mb - 1) / mb
	}
	return n / mb
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
