// Package cgroup makes, fills and removes the cgroups of sandboxes
// (cgroups(7)), on cgroup v1 or v2: one cgroup per sandbox holding its
// init, and below it the commands' ("cmds"), which the init's thread that
// starts commands joins, with the limits of Limits written into them. A
// Set names a sandbox's cgroups; the engine records it with the sandbox.
//
// It is Linux's: on other systems a Set is never made, and its methods
// do nothing.
package cgroup

// Set is the set of cgroups of one sandbox: one folder per v1
// controller hierarchy (v1_linux.go), or one v2 folder (v2_linux.go), and
// below some of them the folder of the commands (CommandsDir). The engine
// records it (as JSON) while the sandbox runs.
type Set struct {
	Version int               `json:"version"` // 1 or 2
	Paths   map[string]string `json:"paths"`   // v1: controller → folder; v2: "unified" → folder
	// Commands maps keys of Paths to the folder of the commands below
	// theirs: v1 "memory" and "pids", v2 "unified" (a threaded cgroup).
	// The init stays in Paths' folders; the thread that starts commands
	// joins these, so every command (and all it starts) is born there.
	Commands map[string]string `json:"commands,omitempty"`
}

// CommandsDir names the cgroup of the commands below a sandbox's.
const CommandsDir = "cmds"

// Dirs returns the distinct folders of the set, those of the commands
// first (a folder can be removed only once its children are).
func (s *Set) Dirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{s.Commands, s.Paths} {
		for _, d := range m {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// Limits are the limits New writes: a zero field is not enforced.
type Limits struct {
	CPU      float64 // cores
	MemoryMB int64   // the commands' memory, in MiB
	PIDs     int64   // the commands' processes and threads
}

// InitMemoryMB and InitPIDs are what a sandbox's init may use besides the
// commands' MemoryMB and PIDs: the init waits for each running command on
// a thread of its own, so it gets PIDs more threads, and a few.
const (
	InitMemoryMB = 64
	InitPIDs     = 64
)
