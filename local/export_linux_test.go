package local

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/internal/disk"
)

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
	return m.Cgroups.Dirs()
}

// CgroupDir returns the running sandbox's cgroup folder of the v1
// controller (v2: "unified"), or its commands' below it when cmds; "" when
// it has none.
func CgroupDir(s *Sandbox, controller string, cmds bool) string {
	var m meta
	if readJSON(filepath.Join(s.dir, metaFile), &m) != nil || m.Cgroups == nil {
		return ""
	}
	if cmds {
		return m.Cgroups.Commands[controller]
	}
	return m.Cgroups.Paths[controller]
}

// DiskImage returns the path of the sandbox's disk image.
func DiskImage(s *Sandbox) string { return filepath.Join(s.dir, diskImage) }

// LoopOf returns the loop device backed by the file img, or "".
func LoopOf(img string) string { return disk.LoopOf(img) }

// HomeFile returns a host path of the file name in the home of the
// sandbox: in its state folder or, when the home is on its disk image
// (mounted in the sandbox's mount namespace only), through its running
// init's root.
func HomeFile(s *Sandbox, name string) string {
	m, err := readMeta(s.dir)
	if err != nil || m.Limits == nil || m.Limits.DiskMB == 0 || m.Init == nil {
		return filepath.Join(s.dir, homeDir, name)
	}
	return filepath.Join("/proc", strconv.Itoa(m.Init.PID), "root", m.Config.home(), name)
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

// SaveImage records img in the image store of stateDir, as pulling or
// building it would: its Layers are folders anywhere, copied into the
// store as layers first.
func SaveImage(ctx context.Context, stateDir string, img *image.Image) (*image.Image, error) {
	st, err := openImages(stateDir)
	if err != nil {
		return nil, err
	}
	in := *img
	in.Layers = nil
	for _, src := range img.Layers {
		layer, err := st.AddLayer(ctx, func(dir string) error {
			out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", dir).CombinedOutput()
			if err != nil {
				return fmt.Errorf("copy %s: %v: %s", src, err, out)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		in.Layers = append(in.Layers, layer)
	}
	return st.Save(ctx, &in)
}

// SetPoolTestUplink makes the spares p starts from now on link to the
// uplink network namespace of the file path, as SetNetworkTestUplink does
// for a sandbox; sandboxes take them when they have the same uplink.
func SetPoolTestUplink(p *Pool, path string, resolver netip.Addr) {
	p.netTest = netTestHooks{Uplink: path, Resolver: resolver}
}

// PoolSpare describes a spare init of a Pool.
type PoolSpare struct {
	PID     int    // the init's
	Link    int    // its link, agentbox<Link>
	FirstID int    // the first host uid of its range
	Key     string // its range's key in the state dir's id pool
}

// PoolSpares returns the spares p holds, in the order sandboxes take them.
func PoolSpares(p *Pool) []PoolSpare {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PoolSpare
	for _, sp := range p.spares {
		s := PoolSpare{PID: sp.cmd.Process.Pid, FirstID: sp.ids.First, Key: sp.key}
		if sp.net != nil {
			s.Link = sp.net.Link
		}
		out = append(out, s)
	}
	return out
}

// Frozen reports whether the running sandbox's cgroups are frozen.
func Frozen(s *Sandbox) bool {
	m, err := readMeta(s.dir)
	return err == nil && m.Cgroups.Frozen()
}

// FreezeSandbox is freezeSandbox on the sandbox's metadata.
func FreezeSandbox(ctx context.Context, s *Sandbox) (func(context.Context) error, error) {
	m, err := readMeta(s.dir)
	if err != nil {
		return nil, err
	}
	return freezeSandbox(ctx, &m)
}

// UserNetPID returns the pid of the running sandbox's user-mode network
// process, or 0.
func UserNetPID(s *Sandbox) int {
	m, err := readMeta(s.dir)
	if err != nil || m.UserNet == nil {
		return 0
	}
	return m.UserNet.PID
}
