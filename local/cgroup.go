package local

// cgroupSet is the set of cgroups of one sandbox: one folder per v1
// controller hierarchy (cgroup_v1_linux.go), or one v2 folder
// (cgroup_v2_linux.go). It is recorded in the metadata while the sandbox
// runs.
type cgroupSet struct {
	Version int               `json:"version"` // 1 or 2
	Paths   map[string]string `json:"paths"`   // v1: controller → folder; v2: "unified" → folder
}

// dirs returns the distinct folders of the set.
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
