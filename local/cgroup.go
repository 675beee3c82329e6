package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// cgroupSet is the set of cgroups of one sandbox: one folder per v1
// controller hierarchy, or one v2 folder.
type cgroupSet struct {
	Version int               `json:"version"` // 1 or 2
	Paths   map[string]string `json:"paths"`   // v1: controller → folder; v2: "unified" → folder
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	dir         string
	v2          bool
	controllers []string
}

func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre, post := strings.Fields(line[:sep]), strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 3 {
			continue
		}
		switch post[0] {
		case "cgroup2":
			out = append(out, cgroupMount{dir: unescapeMount(pre[4]), v2: true})
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(post[2], ",") {
				switch o {
				case "memory", "pids":
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) > 0 {
				out = append(out, cgroupMount{dir: unescapeMount(pre[4]), controllers: ctrls})
			}
		}
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
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

// newCgroupSet creates the cgroups of a sandbox named key. It returns nil
// (no error) when this host offers no cgroups we may use, e.g. when not
// running as root: the sandbox then relies on its pid namespace alone.
func newCgroupSet(key string) (*cgroupSet, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, nil
	}
	own := ownCgroups()
	set := &cgroupSet{Paths: map[string]string{}}
	v1 := false
	for _, m := range mounts {
		if !m.v2 {
			v1 = true
		}
	}
	if v1 {
		set.Version = 1
		for _, m := range mounts {
			if m.v2 {
				continue
			}
			base := own[m.controllers[0]]
			dir := filepath.Join(m.dir, base, "agentbox", key)
			err := os.MkdirAll(dir, 0o755)
			if errors.Is(err, fs.ErrNotExist) {
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
	} else {
		var m *cgroupMount
		for i := range mounts {
			if mounts[i].v2 {
				m = &mounts[i]
			}
		}
		if m == nil {
			return nil, nil
		}
		set.Version = 2
		parent := filepath.Join(m.dir, "agentbox")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", parent, err)
		}
		// Enable what the parent offers; failures only cost accounting.
		if b, err := os.ReadFile(filepath.Join(m.dir, "cgroup.controllers")); err == nil {
			var enable []string
			for _, c := range strings.Fields(string(b)) {
				if c == "memory" || c == "pids" || c == "cpu" {
					enable = append(enable, "+"+c)
				}
			}
			if len(enable) > 0 {
				_ = os.WriteFile(filepath.Join(m.dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
				_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
			}
		}
		dir := filepath.Join(parent, key)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrNotExist) {
			_ = os.MkdirAll(parent, 0o755) // removed by a concurrent destroy
			err = os.Mkdir(dir, 0o755)
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		set.Paths["unified"] = dir
	}
	if len(set.Paths) == 0 {
		return nil, nil
	}
	return set, nil
}

func (s *cgroupSet) dirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range s.Paths {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
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
			_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
		}
		for {
			pids := readPids(d)
			if len(pids) == 0 {
				err := syscall.Rmdir(d)
				if err == nil || errors.Is(err, syscall.ENOENT) {
					// Remove the shared parent too once it is empty; it is
					// busy (and stays) while other sandboxes run.
					if p := filepath.Dir(d); filepath.Base(p) == "agentbox" {
						_ = syscall.Rmdir(p)
					}
					break
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
	return nil
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

// resources reads the limits and usage of the set.
func (s *cgroupSet) resources() *sandbox.Resources {
	r := &sandbox.Resources{CPUCores: float64(runtime.NumCPU())}
	const mb = 1 << 20
	if s.Version == 1 {
		if d, ok := s.Paths["memory"]; ok {
			if n, ok := readInt(filepath.Join(d, "memory.usage_in_bytes")); ok {
				r.MemoryUsedMB = (n + mb - 1) / mb
			}
			if n, ok := readInt(filepath.Join(d, "memory.limit_in_bytes")); ok && n < 1<<50 {
				r.MemoryMB = n / mb
			}
		}
		if d, ok := s.Paths["cpu"]; ok {
			q, ok1 := readInt(filepath.Join(d, "cpu.cfs_quota_us"))
			p, ok2 := readInt(filepath.Join(d, "cpu.cfs_period_us"))
			if ok1 && ok2 && q > 0 && p > 0 {
				r.CPUCores = float64(q) / float64(p)
			}
		}
		return r
	}
	d := s.Paths["unified"]
	if n, ok := readInt(filepath.Join(d, "memory.current")); ok {
		r.MemoryUsedMB = (n + mb - 1) / mb
	}
	if n, ok := readInt(filepath.Join(d, "memory.max")); ok {
		r.MemoryMB = n / mb
	}
	if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
		var q, p int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &q, &p); err == nil && q > 0 && p > 0 {
			r.CPUCores = float64(q) / float64(p)
		}
	}
	return r
}
