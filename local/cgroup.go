package local

import "github.com/agentbox-dev/agentbox/local/internal/cgroup"

// cgroupSet is the cgroups of a sandbox, recorded in its metadata while
// it runs (package cgroup makes and removes them).
type cgroupSet = cgroup.Set
