package daemon

import (
	"os"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/procfs"
)

// findProcs lists the live (non-zombie) processes other than this one and
// init that belong to one of the process groups pgids or whose environment
// has an entry starting with marker (when not empty).
func findProcs(pgids []int, marker string) []int {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, pid := range pids {
		if pid == self || pid <= 1 {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || !st.Live() {
			continue
		}
		if slices.Contains(pgids, st.PGRP) || marker != "" && hasEnvEntry(pid, marker) {
			out = append(out, pid)
		}
	}
	return out
}

// hasEnvEntry reports whether the environment of pid has an entry starting
// with prefix.
func hasEnvEntry(pid int, prefix string) bool {
	env, err := procfs.Environ(pid)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, prefix) })
}
