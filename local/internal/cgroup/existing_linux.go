package cgroup

import (
	"os"
	"path/filepath"
)

// Existing returns the cgroups named key (Key) that exist below h's
// Parents, as a Set whose Destroy kills their processes and removes them,
// or nil when there are none. A process that died while it started a
// sandbox leaves cgroups that no record names: Existing finds them by
// their name alone.
func Existing(h Host, key string) *Set {
	set := &Set{Version: h.Version, Paths: map[string]string{}, Commands: map[string]string{}}
	switch h.Version {
	case 1:
		own := ownCgroups()
		for _, m := range h.v1 {
			set.add(filepath.Join(m.dir, own[m.controllers[0]], Parent, key), m.controllers)
		}
	case 2:
		set.add(filepath.Join(h.v2.dir, Parent, key), []string{"unified"})
	}
	if len(set.Paths) == 0 {
		return nil
	}
	return set
}

// add records dir, when it exists, as the cgroup of keys, with its
// commands' cgroup when that exists too.
func (s *Set) add(dir string, keys []string) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return
	}
	cmds := filepath.Join(dir, CommandsDir)
	_, cerr := os.Stat(cmds)
	for _, k := range keys {
		s.Paths[k] = dir
		if cerr == nil {
			s.Commands[k] = cmds
		}
	}
}
