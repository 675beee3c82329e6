package local

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/local/internal/cgroup"
)

// cgroupHost is what cgroups this host offers sandboxes, and which
// limits they enforce.
type cgroupHost struct {
	cgroup.Host
	have limitSet // the limits its controllers enforce
	why  string   // why the others are not, when some are not
}

// probeCgroups finds the cgroups sandboxes get (cgroup.Probe) and the
// limits they enforce.
func probeCgroups() cgroupHost {
	h := cgroupHost{Host: cgroup.Probe()}
	if h.Version == 0 {
		h.why = h.Why
		return h
	}
	for _, k := range []struct {
		ctrl string
		bit  limitSet
	}{{"cpu", limitCPU}, {"memory", limitMemory}, {"pids", limitPIDs}} {
		if h.Has(k.ctrl) {
			h.have |= k.bit
		}
	}
	if missing := (limitCPU | limitMemory | limitPIDs) &^ h.have; missing != 0 {
		h.why = fmt.Sprintf("this host's cgroup v%d has no controller for %s", h.Version, strings.Join(missing.names(), ", "))
	}
	return h
}

// newCgroupSet creates the cgroups of the sandbox id of stateDir with the
// limits l (nil, no error, when h offers none).
func newCgroupSet(h cgroupHost, stateDir, id string, l *limits) (*cgroupSet, error) {
	return cgroup.New(h.Host, cgroup.Key(stateDir, id), cgroup.Limits{CPU: l.CPU, MemoryMB: l.MemoryMB, PIDs: l.PIDs})
}

// sweepCgroups removes the cgroups of the sandboxes of stateDir whose
// folder is gone: a process that died while it created or removed a
// sandbox leaves them. A sandbox's folder exists (locked) before its
// cgroups are made and goes only after they are removed, so a cgroup of
// this state dir without a folder belongs to no sandbox.
func sweepCgroups(h cgroupHost, stateDir string) {
	cgroup.Sweep(h.Host, cgroup.Key(stateDir, ""), func(id string) bool {
		if ValidateID(id) != nil {
			return false
		}
		_, err := os.Lstat(sandboxDir(stateDir, id))
		return errors.Is(err, os.ErrNotExist)
	})
}
