package daemon

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cgroupfile"

	"github.com/agentbox-dev/agentbox/internal/mountinfo"
)

// cgroupUsage is what the cgroups (and, where they say nothing, the
// kernel's totals) tell about CPU and memory.
type cgroupUsage struct {
	dirs        []string
	cpuLimit    float64       // cores; 0: unlimited
	memLimit    int64         // bytes; 0: unlimited
	memCurrent  int64         // -1: unknown
	memFile     int64         // page cache
	memInactive int64         // inactive page cache (reclaimable)
	cpuTime     time.Duration // CPU time used, as of the latest refreshCPU
}

// readCgroups reads the cgroup folders dirs: a cgroup v2 folder or v1
// folders of the cpu, cpuacct and memory controllers, each recognised by
// the files it has (memory.current is v2's, memory.usage_in_bytes v1's …).
func readCgroups(dirs []string) cgroupUsage {
	u := cgroupUsage{dirs: dirs, memCurrent: -1}
	for _, d := range dirs {
		if v, ok := cgroupfile.ReadInt(filepath.Join(d, "memory.current")); ok { // v2
			u.memCurrent = v
			u.memLimit = minLimit(u.memLimit, upwards(d, "memory.max", parseMax))
			stat := cgroupfile.ReadKeyed(filepath.Join(d, "memory.stat"))
			u.memFile, u.memInactive = stat["file"], stat["inactive_file"]
		}
		if v, ok := cgroupfile.ReadInt(filepath.Join(d, "memory.usage_in_bytes")); ok { // v1
			u.memCurrent = v
			stat := cgroupfile.ReadKeyed(filepath.Join(d, "memory.stat"))
			if l := stat["hierarchical_memory_limit"]; l > 0 && l < math.MaxInt64/2 {
				u.memLimit = minLimit(u.memLimit, l)
			}
			u.memFile, u.memInactive = firstOf(stat, "total_cache", "cache"), firstOf(stat, "total_inactive_file", "inactive_file")
		}
		if l := upwards(d, "cpu.max", parseCPUMax); l > 0 { // v2
			u.cpuLimit = minLimit(u.cpuLimit, l)
		}
		if q, ok := cgroupfile.ReadInt(filepath.Join(d, "cpu.cfs_quota_us")); ok && q > 0 { // v1
			if p, ok := cgroupfile.ReadInt(filepath.Join(d, "cpu.cfs_period_us")); ok && p > 0 {
				u.cpuLimit = minLimit(u.cpuLimit, float64(q)/float64(p))
			}
		}
	}
	u.refreshCPU()
	return u
}

// refreshCPU reads the CPU time used anew and returns it.
func (u *cgroupUsage) refreshCPU() time.Duration {
	known := false
	for _, d := range u.dirs {
		if usec, ok := cgroupfile.ReadKeyed(filepath.Join(d, "cpu.stat"))["usage_usec"]; ok { // v2
			u.cpuTime, known = time.Duration(usec)*time.Microsecond, true
		} else if ns, ok := cgroupfile.ReadInt(filepath.Join(d, "cpuacct.usage")); ok { // v1
			u.cpuTime, known = time.Duration(ns), true
		}
	}
	if !known {
		u.cpuTime = hostCPUTime()
	}
	return u.cpuTime
}

// memory returns the memory limit, the memory in use (the cgroup's usage
// less its reclaimable page cache, as docker stats counts it) and the
// page cache; without a cgroup limit or usage, the machine's.
func (u *cgroupUsage) memory() (total, used, cache int64) {
	info := cgroupfile.ReadKeyed("/proc/meminfo") // in kB
	total = u.memLimit
	if hostTotal := info["MemTotal"] * 1024; total <= 0 || (hostTotal > 0 && hostTotal < total) {
		total = hostTotal
	}
	if u.memCurrent < 0 {
		return total, (info["MemTotal"] - info["MemAvailable"]) * 1024, (info["Cached"] + info["Buffers"]) * 1024
	}
	return total, max(u.memCurrent-u.memInactive, 0), u.memFile
}

// maxCgroupDepth bounds how far upwards looks.
const maxCgroupDepth = 64

// upwards reads file in dir and in its parents while they have it, and
// returns the smallest positive limit parse finds (0: none). Parents are
// reached through "..", not by cutting the path, so that a folder named
// by a descriptor (/proc/self/fd/N) has its real parents.
func upwards[T int64 | float64](dir, file string, parse func(string) T) T {
	var out T
	d := dir
	for range maxCgroupDepth {
		b, err := os.ReadFile(d + "/" + file)
		if err != nil {
			break
		}
		out = minLimit(out, parse(strings.TrimSpace(string(b))))
		d += "/.."
	}
	return out
}

// minLimit returns the smaller of two limits, where 0 means none.
func minLimit[T int64 | float64](a, b T) T {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// parseMax reads a cgroup v2 limit: a number, or "max" (0: none).
func parseMax(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// parseCPUMax reads cgroup v2's cpu.max, "$MAX $PERIOD", as cores.
func parseCPUMax(v string) float64 {
	q, p, _ := strings.Cut(v, " ")
	quota, err1 := strconv.ParseFloat(q, 64)
	period, err2 := strconv.ParseFloat(p, 64)
	if err1 != nil || err2 != nil || period <= 0 {
		return 0
	}
	return quota / period
}

func firstOf(m map[string]int64, keys ...string) int64 {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return 0
}

// userHZ is the unit of /proc/stat's CPU times.
const userHZ = 100

// hostCPUTime is the CPU time the whole machine spent working (not idle),
// from /proc/stat.
func hostCPUTime() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal …
	var ticks int64
	for i, v := range fields {
		if i == 0 || i == 4 || i == 5 || i > 8 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// ownCgroups finds the folders of this process's cgroups from its cgroup
// file (/proc/self/cgroup) and mount table: the cgroup v2 folder, or the
// v1 folders of the cpu, cpuacct and memory controllers.
func ownCgroups(cgroupFile, mountTable string) []string {
	type mount struct{ root, dir string }
	v2, v1 := (*mount)(nil), map[string]mount{}
	mounts, err := mountinfo.Read(mountTable)
	if err != nil {
		return nil
	}
	for _, mi := range mounts {
		m := mount{root: mi.Root, dir: mi.MountPoint}
		switch mi.FSType {
		case "cgroup2":
			if v2 == nil {
				v2 = &m
			}
		case "cgroup":
			for _, opt := range strings.Split(mi.SuperOptions, ",") {
				if opt == "cpu" || opt == "cpuacct" || opt == "memory" {
					if _, dup := v1[opt]; !dup {
						v1[opt] = m
					}
				}
			}
		}
	}
	b, err := os.ReadFile(cgroupFile)
	if err != nil {
		return nil
	}
	var v1dirs []string
	var v2dir string
	for _, line := range strings.Split(string(b), "\n") {
		// 0::/user.slice/… (v2), 4:cpu,cpuacct:/… (v1)
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			if v2 != nil {
				v2dir = underMount(v2.root, v2.dir, parts[2])
			}
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if m, ok := v1[ctrl]; ok {
				if d := underMount(m.root, m.dir, parts[2]); d != "" && !slices.Contains(v1dirs, d) {
					v1dirs = append(v1dirs, d)
				}
			}
		}
	}
	if len(v1dirs) > 0 {
		return v1dirs
	}
	if v2dir != "" {
		return []string{v2dir}
	}
	return nil
}

// underMount returns where the cgroup at path cg is seen through a mount of
// the hierarchy's root folder root at dir ("" when the mount does not
// reach it).
func underMount(root, dir, cg string) string {
	rel, err := filepath.Rel(root, cg)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(dir, rel)
}
