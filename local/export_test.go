package local

import "path/filepath"

// HostIDLimit ends the pool of host id ranges.
const HostIDLimit = hostIDLimit

// InitPID returns the host pid of the sandbox's running init, or 0.
func InitPID(s *Sandbox) int { return InitPIDOf(s.opts.StateDir, s.opts.ID) }

// InitPIDOf returns the host pid of the running init of the sandbox id in
// stateDir, or 0.
func InitPIDOf(stateDir, id string) int {
	r, ok := liveInit(sandboxDir(stateDir, id))
	if !ok {
		return 0
	}
	return r.PID
}

// Dir returns the sandbox's state folder.
func Dir(s *Sandbox) string { return s.dir }

// CgroupDirs returns the cgroup folders recorded for the running sandbox.
func CgroupDirs(s *Sandbox) []string {
	var m meta
	if readJSON(filepath.Join(s.dir, metaFile), &m) != nil || m.Cgroups == nil {
		return nil
	}
	return m.Cgroups.dirs()
}
