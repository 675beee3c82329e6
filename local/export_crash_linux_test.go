package local

import (
	"github.com/agentbox-dev/agentbox/local/internal/cgroup"
)

// SetCrashPoint makes f run at every crash point of the package (see
// crashPoint).
func SetCrashPoint(f func(step string)) { crashPoint = f }

// PendingInitPID returns the pid of the init that the last start of the
// sandbox id of stateDir forked, while it runs, or 0.
func PendingInitPID(stateDir, id string) int {
	r, ok := pendingInit(sandboxDir(stateDir, id))
	if !ok {
		return 0
	}
	return r.PID
}

// CgroupsLeft reports whether cgroups named for the sandbox id of
// stateDir exist.
func CgroupsLeft(stateDir, id string) bool {
	return cgroup.Existing(probeCgroups().Host, cgroup.Key(stateDir, id)) != nil
}
