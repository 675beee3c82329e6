package local

import (
	"net/netip"
	"path/filepath"
)

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

// SetNetworkTestUplink makes the next boots of s link it to the uplink
// network namespace of the file path (a test's "internet") instead of the
// host's, and forward its DNS to resolver (when valid).
func SetNetworkTestUplink(s *Sandbox, path string, resolver netip.Addr) {
	s.netTest = netTestHooks{Uplink: path, Resolver: resolver}
}

// NetworkLink returns the number n of the running sandbox's link
// (agentbox<n>), or 0.
func NetworkLink(s *Sandbox) int {
	m, err := readMeta(s.dir)
	if err != nil || m.Network == nil {
		return 0
	}
	return m.Network.Link
}
