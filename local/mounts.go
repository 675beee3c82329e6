package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/mount"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Bucket mounts (package mount's S3Filesystem and GCSFilesystem). The
// FUSE tool (s3fs, gcsfuse) runs on the host, as root, never in the
// sandbox: it mounts the bucket on a folder of the state dir, and the
// mount is then moved into the sandbox's mount namespace at its path
// (open_tree, then move_mount from a thread that entered that
// namespace), owned by the host ids the sandbox's user maps to. So the
// credentials never enter the sandbox: they live in the mount's folder of
// the state dir (mode 0600 files in mode 0700 folders), which the sandbox
// does not see, and leave with Unmount or Destroy.
//
// The host's own copy of the mount is detached once the sandbox's is in
// place: the sandbox's mount namespace holds the only reference, so the
// tool exits when the sandbox stops or unmounts it. Mounts are recorded in
// meta.json and mounted again at every start; one that fails then is
// recorded with its error (Info, Mounts) and leaves the start alone.
//
// Layout: <StateDir>/sandboxes/<id>/mounts/<key>/ with config.json (the
// filesystem with its credentials), creds/ (the tool's credential files),
// mnt/ (where the tool mounts) and tool.log (its output).

const mountsDir = "mounts"

// MountOptions adjust how the FUSE tools of a sandbox's mounts run. They
// are recorded with each mount and used again when it is mounted at a
// later start.
type MountOptions struct {
	// Netns, when not empty, is a network namespace (a file such as
	// /run/netns/NAME or /proc/PID/ns/net) the tool runs in instead of
	// the host's; e.g. a loopback-only one for tests.
	Netns string
	// Env is added to the tool's environment ("NAME=value"), e.g.
	// GCE_METADATA_HOST for gcsfuse.
	Env []string
}

// mountRecord is a mount of a sandbox, in its meta.json: nothing secret.
type mountRecord struct {
	Path       string             `json:"path"`
	Kind       string             `json:"kind"`
	Filesystem string             `json:"filesystem"` // its String
	ReadOnly   bool               `json:"readOnly,omitempty"`
	Hash       string             `json:"hash"` // mount.ConfigHash
	Key        string             `json:"key"`  // the folder under mounts/
	State      sandbox.MountState `json:"state"`
	Error      string             `json:"error,omitempty"`
	// Tool is the running FUSE tool; nil when not mounted.
	Tool    *initRecord  `json:"tool,omitempty"`
	Options MountOptions `json:"options,omitzero"`
}

// mountKey names the folder of the mount at path.
func mountKey(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:8])
}

// mountFolder returns the folder of the mount key of the sandbox folder dir.
func mountFolder(dir, key string) string { return filepath.Join(dir, mountsDir, key) }

// info describes r, whose sandbox runs or not.
func (r *mountRecord) info(running bool) sandbox.MountInfo {
	mi := sandbox.MountInfo{Path: r.Path, Filesystem: r.Filesystem, Kind: r.Kind, ReadOnly: r.ReadOnly, State: r.State, Error: r.Error}
	switch {
	case !running && r.State == sandbox.MountMounted:
		mi.State = sandbox.MountPending
	case running && r.State == sandbox.MountMounted && !r.toolAlive():
		mi.State, mi.Error = sandbox.MountError, "the FUSE tool ("+toolOf(r.Kind)+") has exited; mount it again"
	}
	return mi
}

// toolAlive reports whether the recorded FUSE tool runs.
func (r *mountRecord) toolAlive() bool {
	if r.Tool == nil {
		return false
	}
	st, ok := procStartTime(r.Tool.PID)
	return ok && st == r.Tool.StartTime
}

// toolOf names the FUSE tool of a kind of filesystem.
func toolOf(kind string) string {
	switch kind {
	case "s3":
		return mount.ToolS3FS
	case "gcs":
		return mount.ToolGCSFuse
	}
	return kind
}

// checkMountPath checks that path is a safe place for a mount in the
// sandbox m: mount.ValidatePath, and not the home or working directory
// itself, nor a volume's path.
func checkMountPath(m *meta, path string) error {
	if err := mount.ValidatePath(path); err != nil {
		return err
	}
	p := strings.TrimSuffix(path, "/")
	c := &m.Config
	homes := []string{c.home()}
	if m.RunAs != nil {
		homes = append(homes, m.RunAs.Home)
	}
	for _, h := range homes {
		if p == h {
			return fmt.Errorf("%w: mount path %s is the home folder itself: mount in a folder of it (e.g. %s/bucket)", mount.ErrInvalid, path, h)
		}
	}
	if c.WorkingDirectory != "" && p == strings.TrimSuffix(c.WorkingDirectory, "/") {
		return fmt.Errorf("%w: mount path %s is the working directory itself: mount in a folder of it", mount.ErrInvalid, path)
	}
	for _, v := range c.Volumes {
		if p == strings.TrimSuffix(v.MountPath, "/") {
			return fmt.Errorf("%w: mount path %s is volume %s's", mount.ErrInvalid, path, v.Name)
		}
	}
	return nil
}

// Mount mounts fs (a mount.S3Filesystem or mount.GCSFilesystem, or a
// pointer to one) at path, an absolute path inside the sandbox, starting
// the sandbox first if needed. The FUSE tool runs on the host and the
// credentials never enter the sandbox (see the package documentation).
// The mount is kept across Stop and Start; mounting the same filesystem
// at the same path again does nothing. It needs root.
func (s *Sandbox) Mount(ctx context.Context, fs sandbox.Filesystem, path string) error {
	if err := s.EnsureRunning(ctx); err != nil {
		return &sandbox.MountFailure{Op: "mount", Path: path, Filesystem: fs.String(), Err: err}
	}
	stateDir, id, o := s.opts.StateDir, s.opts.ID, s.opts.Mount
	fail := func(err error) error {
		return &sandbox.MountFailure{Op: "mount", Path: path, Filesystem: fs.String(), Err: err}
	}
	return withLockedMeta(ctx, stateDir, id, func(dir string, m *meta) error {
		if err := checkMountPath(m, path); err != nil {
			return fail(err)
		}
		if !m.alive() {
			return fail(&sandbox.NotReadyError{ID: id, Err: errors.New("mounting needs a running sandbox: start it first")})
		}
		hash := mount.ConfigHash(fs)
		i := slices.IndexFunc(m.Mounts, func(r mountRecord) bool { return r.Path == path })
		if i >= 0 {
			r := &m.Mounts[i]
			if r.Hash == hash && r.State == sandbox.MountMounted && r.toolAlive() {
				return nil // the same, in place
			}
			if err := unmountRecord(ctx, dir, m, r); err != nil {
				return fail(fmt.Errorf("replace the mount in place: %w", err))
			}
			m.Mounts = slices.Delete(m.Mounts, i, i+1)
		}
		for _, r := range m.Mounts {
			if strings.HasPrefix(path+"/", r.Path+"/") || strings.HasPrefix(r.Path+"/", path+"/") {
				return fail(fmt.Errorf("%w: %s is mounted at %s: mount paths may not nest", mount.ErrInvalid, r.Filesystem, r.Path))
			}
		}
		r := mountRecord{Path: path, Kind: fs.Kind(), Filesystem: fs.String(), Hash: hash, Key: mountKey(path), Options: o}
		if err := mountNew(ctx, dir, m, &r, fs); err != nil {
			return fail(err)
		}
		m.Mounts = append(m.Mounts, r)
		return nil
	})
}

// Unmount removes the mount at path; its FUSE tool ends and its
// credentials are deleted.
func (s *Sandbox) Unmount(ctx context.Context, path string) error {
	stateDir, id := s.opts.StateDir, s.opts.ID
	return withLockedMeta(ctx, stateDir, id, func(dir string, m *meta) error {
		i := slices.IndexFunc(m.Mounts, func(r mountRecord) bool { return r.Path == path })
		if i < 0 {
			return &sandbox.MountFailure{Op: "unmount", Path: path, Err: fmt.Errorf("%w: nothing is mounted there in sandbox %q", sandbox.ErrNotFound, id)}
		}
		if err := unmountRecord(ctx, dir, m, &m.Mounts[i]); err != nil {
			return &sandbox.MountFailure{Op: "unmount", Path: path, Filesystem: m.Mounts[i].Filesystem, Err: err}
		}
		m.Mounts = slices.Delete(m.Mounts, i, i+1)
		return nil
	})
}

// Mounts lists the sandbox's bucket mounts with their states.
func (s *Sandbox) Mounts(ctx context.Context) ([]sandbox.MountInfo, error) {
	info, err := lookup(ctx, s.opts.StateDir, s.opts.ID)
	if err != nil {
		return nil, err
	}
	var out []sandbox.MountInfo
	for _, mi := range info.Mounts {
		if mi.State != "" {
			out = append(out, mi)
		}
	}
	return out, nil
}

var _ sandbox.Mounter = (*Sandbox)(nil)
