package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// architecture Linux runs this on).
const clockTick = 10 * time.Millisecond

// A procStat is what fastbench reads of /proc/PID/stat.
type procStat struct {
	PPID  int
	Start uint64 // clock ticks since boot
	CPU   uint64 // utime+stime+cutime+cstime, clock ticks
}

// parseStat parses the text of /proc/PID/stat.
func parseStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("stat: %d fields", len(f))
	}
	n := func(k int) uint64 { v, _ := strconv.ParseUint(f[k], 10, 64); return v }
	// f[0] is field 3 (state): field k of proc(5) is f[k-3].
	return procStat{PPID: int(n(1)), CPU: n(11) + n(12) + n(13) + n(14), Start: n(19)}, nil
}

// readStat reads /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

// cmdline returns /proc/PID/cmdline with spaces between the arguments.
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// scanProcs returns the host's processes; with pss, their Pss too (0
// where smaps_rollup cannot be read: another user's).
func scanProcs(pss bool) map[int]proc {
	out := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		p := proc{PID: pid, PPID: st.PPID, Start: st.Start, Cmdline: cmdline(pid)}
		if pss {
			if f, err := os.Open("/proc/" + e.Name() + "/smaps_rollup"); err == nil {
				p.Pss, _ = parsePss(f)
				f.Close()
			}
		}
		out[pid] = p
	}
	return out
}

// nowTicks returns the time since boot in clock ticks.
func nowTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	s, _ := strconv.ParseFloat(f[0], 64)
	return uint64(s * float64(time.Second/clockTick))
}

// initPID returns the pid of the init of sandbox id ("agentbox-init ID").
func initPID(id string) (int, error) {
	for pid, p := range scanProcs(false) {
		if got, ok := initID(p.Cmdline); ok && got == id {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process \"agentbox-init %s\"", id)
}

// cgroupCPU returns the CPU time used by the cgroup of pid (v1 cpuacct,
// or v2), and the file read; an error when pid is in the root cgroup
// (a sandbox without cgroups of its own).
func cgroupCPU(pid int) (time.Duration, string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[2] == "/" {
			continue // the root cgroup: the host's, not the sandbox's own
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpuacct" {
				p := filepath.Join("/sys/fs/cgroup/cpuacct", parts[2], "cpuacct.usage")
				d, err := readCgroupInt(p, "")
				return time.Duration(d), p, err
			}
		}
		if parts[0] == "0" {
			p := filepath.Join("/sys/fs/cgroup", parts[2], "cpu.stat")
			d, err := readCgroupInt(p, "usage_usec")
			return time.Duration(d) * time.Microsecond, p, err
		}
	}
	return 0, "", fmt.Errorf("no cpu accounting cgroup of pid %d", pid)
}

// readCgroupInt reads an integer file, or the key line of a flat-keyed one.
func readCgroupInt(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case key == "" && len(f) == 1:
			return strconv.ParseInt(f[0], 10, 64)
		case key != "" && len(f) == 2 && f[0] == key:
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no value %q", path, key)
}

// vmHWM returns this process's peak resident set (VmHWM), in bytes.
func vmHWM() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status: no VmHWM")
}
