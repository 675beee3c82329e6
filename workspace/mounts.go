package workspace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// FilesystemMounts mounts filesystems (package mount's buckets) at paths
// of a workspace's sandbox with [sandbox.Mount]: it is the [Mounts] of
// Mastra's `new Workspace({mounts: {path: filesystem}})`. A mount that
// fails does not fail the workspace's start (as in Mastra): its state and
// error show in [FilesystemMounts.States], in the sandbox's Info (Mounts)
// and in Instructions.
type FilesystemMounts struct {
	paths []string // sorted
	fs    map[string]sandbox.Filesystem

	mu     sync.Mutex
	states map[string]sandbox.MountInfo
}

var _ Mounts = (*FilesystemMounts)(nil)

// NewFilesystemMounts returns the mounts of fs, a map from absolute paths
// inside the sandbox to filesystems. It checks every path
// (mount.ValidatePath) and that no filesystem is nil.
func NewFilesystemMounts(fs map[string]sandbox.Filesystem) (*FilesystemMounts, error) {
	m := &FilesystemMounts{fs: maps.Clone(fs), states: map[string]sandbox.MountInfo{}}
	for p, f := range fs {
		if err := mount.ValidatePath(p); err != nil {
			return nil, fmt.Errorf("workspace: mount path %q: %w", p, err)
		}
		if f == nil {
			return nil, fmt.Errorf("workspace: the filesystem to mount at %s is nil: %w", p, sandbox.ErrInvalidArgument)
		}
		m.states[p] = sandbox.MountInfo{Path: p, Filesystem: f.String(), Kind: f.Kind(), State: sandbox.MountPending}
	}
	m.paths = slices.Sorted(maps.Keys(m.fs))
	return m, nil
}

// Mount mounts every filesystem into sb, parents first, recording each
// outcome. It fails only when ctx ends; a sandbox that cannot mount
// leaves the mounts in state unsupported.
func (m *FilesystemMounts) Mount(ctx context.Context, sb sandbox.Sandbox) error {
	for _, p := range m.paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := m.fs[p]
		info := sandbox.MountInfo{Path: p, Filesystem: f.String(), Kind: f.Kind(), State: sandbox.MountMounted}
		if err := sandbox.Mount(ctx, sb, f, p); err != nil {
			info.State, info.Error = sandbox.MountError, err.Error()
			switch {
			case isUnsupported(err):
				info.State = sandbox.MountUnsupported
			case isToolMissing(err):
				info.State = sandbox.MountUnavailable
			}
		}
		if list, err := sandbox.Mounts(ctx, sb); err == nil {
			for _, mi := range list {
				if mi.Path == p {
					info.ReadOnly = mi.ReadOnly
				}
			}
		}
		m.mu.Lock()
		m.states[p] = info
		m.mu.Unlock()
	}
	return nil
}

func isUnsupported(err error) bool { return errors.Is(err, sandbox.ErrUnsupported) }
func isToolMissing(err error) bool { return errors.Is(err, mount.ErrToolNotFound) }

// States returns the mounts' states, by path order.
func (m *FilesystemMounts) States() []sandbox.MountInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]sandbox.MountInfo, 0, len(m.paths))
	for _, p := range m.paths {
		out = append(out, m.states[p])
	}
	return out
}

// Instructions tells an agent where the filesystems are mounted, and
// which are not available and why.
func (m *FilesystemMounts) Instructions() string {
	var ok, bad []string
	for _, s := range m.States() {
		switch s.State {
		case sandbox.MountMounted:
			d := fmt.Sprintf("%s at %s", s.Filesystem, s.Path)
			if s.ReadOnly {
				d += " (read-only)"
			}
			ok = append(ok, d)
		case sandbox.MountPending:
			ok = append(ok, fmt.Sprintf("%s at %s (mounted when the sandbox starts)", s.Filesystem, s.Path))
		default:
			bad = append(bad, fmt.Sprintf("%s at %s (%s: %s)", s.Filesystem, s.Path, s.State, s.Error))
		}
	}
	var parts []string
	if len(ok) > 0 {
		parts = append(parts, "Mounted filesystems: "+strings.Join(ok, "; ")+".")
	}
	if len(bad) > 0 {
		parts = append(parts, "Not mounted: "+strings.Join(bad, "; ")+".")
	}
	return strings.Join(parts, " ")
}
