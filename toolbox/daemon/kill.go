package daemon

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markerKey is the private environment variable that tags every process a
// command starts, so that daemonised descendants (which left the process
// group with setsid) can still be found in /proc.
const markerKey = "AGENTBOX_SESSION_CMD"

// killGrace is how long processes get between SIGTERM and SIGKILL.
const killGrace = time.Second

// killTree ends every process in the process groups pgids and every process
// whose environment carries markerKey with a value starting with
// markerPrefix: SIGTERM first, SIGKILL after killGrace. It returns when no
// such process is alive (zombies count as dead) or after a bounded time.
func killTree(pgids []int, markerPrefix string) {
	self := os.Getpid()
	needle := []byte(markerKey + "=" + markerPrefix)
	signalAll := func(sig syscall.Signal) []int {
		for _, pg := range pgids {
			if pg > 1 {
				_ = syscall.Kill(-pg, sig)
			}
		}
		pids := findProcs(pgids, needle, self)
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		return pids
	}
	alive := signalAll(syscall.SIGTERM)
	if len(alive) == 0 {
		return
	}
	deadline := time.Now().Add(killGrace)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if len(findProcs(pgids, needle, self)) == 0 {
			return
		}
	}
	// Kill until nothing is left; new children may appear while we work.
	for i := 0; i < 50; i++ {
		if len(signalAll(syscall.SIGKILL)) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findProcs lists the live (non-zombie) processes that belong to one of the
// process groups pgids or whose environment contains needle.
func findProcs(pgids []int, needle []byte, self int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		match := false
		for _, pg := range pgids {
			if pg == pgrp {
				match = true
				break
			}
		}
		if !match && len(needle) > 0 {
			env, err := os.ReadFile("/proc/" + name + "/environ")
			if err == nil && hasEnvEntry(env, needle) {
				match = true
			}
		}
		if match {
			out = append(out, pid)
		}
	}
	return out
}

// hasEnvEntry reports whether the NUL-separated environment env has an
// entry starting with needle.
func hasEnvEntry(env, needle []byte) bool {
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if bytes.HasPrefix(entry, needle) {
			return true
		}
	}
	return false
}

// procStat reads the state and process group of pid from /proc/pid/stat.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	// Fields after the name: state ppid pgrp ...
	if len(f) < 3 || len(f[0]) == 0 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
