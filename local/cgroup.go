package local

// cgroupSet is the set of cgroups of one sandbox: one folder per v1
// controller hierarchy (cgroup_v1_linux.go), or one v2 folder
// (cgroup_v2_linux.go), and below some of them the folder of the commands
// (cmdsCgroup). It is recorded in the metadata while the sandbox runs.
type cgroupSet struct {
	Version int               `json:"version"` // 1 or 2
	Paths   map[string]string `json:"paths"`   // v1: controller → folder; v2: "unified" → folder
	// Commands maps keys of Paths to the folder of the commands below
	// theirs: v1 "memory" and "pids", v2 "unified" (a threaded cgroup).
	// The init stays in Paths' folders; the thread that starts commands
	// joins these, so every command (and all it starts) is born there.
	Commands map[string]string `json:"commands,omitempty"`
}

// cmdsCgroup names the cgroup of the commands below a sandbox's.
const cmdsCgroup = "cmds"

// dirs returns the distinct folders of the set, those of the commands
// first (a folder can be removed only once its children are).
func (s *cgroupSet) dirs() []string {
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
