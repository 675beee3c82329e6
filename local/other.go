//go:build !linux

package local

import (
	"context"
	"net"
	"path/filepath"
	"runtime"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Stubs of the Linux-only parts, for the package to build on other
// systems. New fails there (checkPlatform), so no sandbox ever starts;
// the state dir functions (List, Open, and a handle's Info, Stop and
// Destroy) still read and remove what a state dir holds.

// initMain does nothing: no process is a sandbox init here.
func initMain() {}

// egressProxyMain does nothing: no sandbox has an egress proxy here.
func egressProxyMain() {}

// netsockMain does nothing: no sandbox has a netsock process here.
func netsockMain() {}

// boot fails: local sandboxes need Linux.
func (s *Sandbox) boot(context.Context, string, *meta) error {
	return checkPlatform(runtime.GOOS)
}

// procStartTime reports every process as gone: no init runs here.
func procStartTime(int) (uint64, bool) { return 0, false }

// terminate does nothing: no init runs here.
func terminate(context.Context, initRecord) {}

// hostRoot returns nil: no sandbox starts here.
func hostRoot(string) (*rootRecord, error) { return nil, nil }

// nextHostIDs returns nil: no sandbox starts here.
func nextHostIDs() *idRange { return nil }

// shortPath returns dir/name.
func shortPath(dir, name string) (string, func(), error) {
	return filepath.Join(dir, name), func() {}, nil
}

// plannedLimits returns no limit: no sandbox starts here.
func plannedLimits(Resources, string) limits {
	return limits{Why: "local sandboxes need Linux"}
}

// diskUsage returns zeros: no sandbox runs here.
func diskUsage(*meta) (size, used int64) { return 0, 0 }

// checkResources accepts r: New fails here anyway (checkPlatform).
func checkResources(Resources, string, int64) error { return nil }

// waitDiskReleased does nothing: no disk image is mounted here.
func waitDiskReleased(context.Context, string) error { return nil }

// teardownNetwork does nothing: no sandbox network is made here.
func teardownNetwork(context.Context, *meta) {}

// addNetworkState adds the published ports only: nothing runs here.
func addNetworkState(_ string, m *meta, n *sandbox.NetworkInfo) { n.Ports = m.Ports }

// checkNetworkAvailable fails: local sandboxes need Linux.
func checkNetworkAvailable(*Config) error { return checkPlatform(runtime.GOOS) }

// checkLiveNetwork fails: local sandboxes need Linux.
func checkLiveNetwork(*meta, *Config) error { return checkPlatform(runtime.GOOS) }

// stopUserNet does nothing: no sandbox runs here.
func stopUserNet(context.Context, *meta) {}

// usernetMain does nothing: no sandbox runs here.
func usernetMain() {}

// applyNetwork fails: no sandbox runs here.
func (s *Sandbox) applyNetwork(context.Context, string, *meta, Config) error {
	return checkPlatform(runtime.GOOS)
}

// claimHostPort fails: local sandboxes need Linux.
func claimHostPort(context.Context, *meta, int) (int, error) { return 0, checkPlatform(runtime.GOOS) }

// applyPorts does nothing: no sandbox runs here.
func applyPorts(context.Context, *meta) error { return nil }

// stopEgressProxy does nothing: no sandbox has an egress proxy here.
func stopEgressProxy(context.Context, string, *meta) {}

// egressServes reports false: no sandbox has an egress proxy here.
func egressServes(context.Context, string, string) bool { return false }

// healEgress does nothing: no sandbox has an egress proxy here.
func (s *Sandbox) healEgress(context.Context) {}

// writableRootAvailable is false: images need Linux.
func writableRootAvailable() bool { return false }

// CreateSnapshot fails: local sandboxes need Linux.
func (*Sandbox) CreateSnapshot(context.Context, string) (*image.Image, error) {
	return nil, checkPlatform(runtime.GOOS)
}

// freezeLayer fails: local sandboxes need Linux.
func freezeLayer(context.Context, string, string) (string, error) {
	return "", checkPlatform(runtime.GOOS)
}

// mountNew fails: local sandboxes need Linux.
func mountNew(context.Context, string, *meta, *mountRecord, sandbox.Filesystem) error {
	return checkPlatform(runtime.GOOS)
}

// unmountRecord forgets the mount: no FUSE tool runs here.
func unmountRecord(context.Context, string, *meta, *mountRecord) error { return nil }

// stopMounts does nothing: no FUSE tool runs here.
func stopMounts(context.Context, string, *meta) {}

// spare is never made here: no init runs.
type spare struct{}

// poolAvailable fails: local sandboxes need Linux.
func poolAvailable() error { return checkPlatform(runtime.GOOS) }

// startSpare fails: local sandboxes need Linux.
func startSpare(context.Context, *Pool) (*spare, error) { return nil, checkPlatform(runtime.GOOS) }

func (*spare) alive() bool                           { return false }
func (*spare) destroy(context.Context, string) error { return nil }

// DialPort fails: local sandboxes need Linux.
func (*Sandbox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, checkPlatform(runtime.GOOS)
}

// Fork fails: local sandboxes need Linux.
func (*Sandbox) Fork(context.Context, sandbox.ForkOptions) (*Sandbox, error) {
	return nil, checkPlatform(runtime.GOOS)
}
