package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/internal/disk"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Fork makes the new sandbox opts.ID (generated when empty) of this one's
// state dir with a copy of this sandbox's files (its root's upper layer,
// home, /tmp, working directory; or its disk image, whose files keep the
// source's owners and which the fork mounts ID-mapped to its own host
// ids: a fork costs the same at 10k files as at none), its Config (Name and
// Labels from opts; nil Labels keep the source's) with its network policy
// and volumes (shared, not copied), and its bucket mounts, but not its
// published ports (a host port serves one sandbox). The fork has its own
// host ids, network link and cgroups. It runs when this sandbox runs,
// which keeps running: its processes are frozen during the copy so that
// the copy is consistent (where there is no freezer, without root, the
// copy is of files in use). Fork fails with an error matching
// sandbox.ErrNotFound when this sandbox does not exist,
// sandbox.ErrInvalidArgument for a malformed or taken id, and
// sandbox.ErrInvalidState when this sandbox is being destroyed, and
// ErrDiskBudget when a copy of its disk image does not fit the state
// dir's disk budget (Options.DiskBudgetMB); nothing is made then.
func (s *Sandbox) Fork(ctx context.Context, opts sandbox.ForkOptions) (*Sandbox, error) {
	if st := s.Status(); st == sandbox.StatusDestroying || st == sandbox.StatusDestroyed {
		return nil, fmt.Errorf("fork of sandbox %s: %w: it is %s", s.opts.ID, sandbox.ErrInvalidState, st)
	}
	id := opts.ID
	if id == "" {
		id = generateID()
	}
	if err := ValidateID(id); err != nil {
		return nil, fmt.Errorf("fork id: %w", err)
	}
	running, err := s.forkFiles(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	f, err := Open(ctx, s.opts.StateDir, id)
	if err == nil && running {
		_, err = f.Start(ctx)
	}
	if err != nil {
		if f != nil {
			_ = f.Destroy(context.WithoutCancel(ctx))
		} else {
			_ = remove(context.WithoutCancel(ctx), s.opts.StateDir, id)
		}
		return nil, fmt.Errorf("fork %s of sandbox %s: start it: %w", id, s.opts.ID, err)
	}
	return f, nil
}

// forkFiles makes the stopped sandbox id, a copy of this one shaped by
// opts, under the locks of both, and reports whether this one runs.
func (s *Sandbox) forkFiles(ctx context.Context, id string, opts sandbox.ForkOptions) (bool, error) {
	stateDir, src, err := lockExisting(ctx, s.opts.StateDir, s.opts.ID)
	if err != nil {
		return false, err
	}
	defer src.unlock()
	m, err := readMeta(src.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, notFound(stateDir, s.opts.ID)
	} else if err != nil {
		return false, fmt.Errorf("sandbox %q: read metadata: %w", s.opts.ID, err)
	}
	if m.Status == sandbox.StatusDestroying || m.Status == sandbox.StatusDestroyed {
		return false, fmt.Errorf("fork of sandbox %s: %w: it is being destroyed", s.opts.ID, sandbox.ErrInvalidState)
	}
	if id == s.opts.ID {
		return false, fmt.Errorf("%w: fork id %q is the source's: choose a new one", sandbox.ErrInvalidArgument, id)
	}
	// The fork's disk image is a full-size copy: it takes the disk
	// budget a create of that size would.
	if mb := imageMB(src.path); mb > 0 {
		if err := checkDiskBudget(hostLimits{}, Resources{DiskMiB: mb}, stateDir, s.opts.DiskBudgetMB); err != nil {
			return false, fmt.Errorf("fork %s of sandbox %s (its disk image): %w", id, s.opts.ID, err)
		}
	}
	dst, err := lockSandbox(ctx, stateDir, id, true)
	if err != nil {
		return false, err
	}
	defer dst.unlock()
	if _, err := os.Lstat(filepath.Join(dst.path, metaFile)); err == nil {
		return false, fmt.Errorf("%w: sandbox %s exists: choose another id for the fork", sandbox.ErrInvalidArgument, id)
	}
	fm, err := forkLocked(ctx, stateDir, src.path, dst.path, &m, id, s.opts.HostIDBase)
	if err != nil {
		cctx := context.WithoutCancel(ctx)
		if removeAll(dst.path) == nil {
			_ = releaseHostIDs(cctx, stateDir, id)
			_ = releaseRoot(stateDir, id, fm.Root)
		}
		return false, fmt.Errorf("fork %s of sandbox %s: %w", id, s.opts.ID, err)
	}
	fm.Config.Name = opts.Name
	if opts.Labels != nil {
		fm.Config.Labels = maps.Clone(opts.Labels)
	}
	if err := writeMeta(dst.path, fm); err != nil {
		_ = removeLocked(context.WithoutCancel(ctx), stateDir, dst)
		return false, fmt.Errorf("fork %s: write metadata: %w", id, err)
	}
	return m.alive(), nil
}

// forkLocked copies the locked sandbox folder src (metadata m) into the
// locked, empty folder dst of the new sandbox id, and returns the new
// sandbox's metadata, stopped, which the caller writes. It holds the
// source's image for the fork and gives it host ids of its own (from base,
// Options.HostIDBase) when the source has a range; on error, the returned
// metadata says what to release.
func forkLocked(ctx context.Context, stateDir, src, dst string, m *meta, id string, base int) (*meta, error) {
	fm := &meta{ID: id, CreatedAt: time.Now().UTC(), Status: sandbox.StatusStopped, Config: m.Config, LastUsedAt: time.Now().UTC()}
	fm.Config.Labels = maps.Clone(m.Config.Labels)
	if m.Root != nil {
		r := *m.Root
		if r.Image != "" {
			st, err := openImages(stateDir)
			if err != nil {
				return fm, err
			}
			if _, err := st.Hold(id, r.Image); err != nil {
				return fm, fmt.Errorf("hold image %s: %w", r.Image, err)
			}
		}
		fm.Root = &r
	}
	if m.HostIDs != nil {
		ids := *m.HostIDs
		if ownedByRange(m.HostIDs) {
			got, err := allocateHostIDs(ctx, stateDir, id, base)
			if err != nil {
				return fm, err
			}
			ids = got
		}
		fm.HostIDs = &ids
	}
	fm.RunAs = m.RunAs
	for _, r := range m.Mounts {
		r.Tool, r.Error = nil, ""
		if r.State == sandbox.MountMounted || r.State == sandbox.MountMounting {
			r.State = sandbox.MountPending
		}
		fm.Mounts = append(fm.Mounts, r)
	}
	if err := copySandboxFiles(ctx, src, dst, m, shiftRange(m.HostIDs, fm.HostIDs)); err != nil {
		return fm, err
	}
	if err := forkSecrets(stateDir, src, m.ID, dst, id); err != nil {
		return fm, err
	}
	if imageMB(dst) > 0 {
		fm.DiskIDs = forkDiskIDs(m, fm) // its mounts are ID-mapped: no owner changes
	}
	return fm, nil
}

// copySandboxFiles copies the files of the sandbox folder src (metadata
// m; frozen meanwhile when it runs) into dst: its disk image as it is
// (the fork's DiskIDs say whose ids its files have), or its folders,
// owners mapped by shift.
func copySandboxFiles(ctx context.Context, src, dst string, m *meta, shift idShift) (err error) {
	if err := copyMountConfigs(src, dst, m); err != nil {
		return err
	}
	if m.alive() {
		thaw, err := freezeSandbox(ctx, m)
		if errors.Is(err, sandbox.ErrUnsupported) {
			// No freezer (not root): the copy is of files in use.
			thaw, err = func(context.Context) error { return nil }, nil
		}
		if err != nil {
			return fmt.Errorf("freeze the source for a consistent copy: %w", err)
		}
		defer func() {
			if terr := thaw(context.WithoutCancel(ctx)); terr != nil && err == nil {
				err = fmt.Errorf("thaw the source: %w", terr)
			}
		}()
	}
	if imageMB(src) > 0 {
		return copyDiskImage(src, dst, m)
	}
	return copyDataFolders(src, dst, shift)
}

// dataFolders are the folders of a sandbox's data folder (its state
// folder, or its disk image's root) a fork copies.
var dataFolders = []string{homeDir, tmpDir, workDir, rootFS}

// copyDataFolders copies the data folders of src that exist into dst,
// all but overlayfs's work folders (rootfs/work, rootfs/host/*/work).
func copyDataFolders(src, dst string, shift idShift) error {
	skip := func(rel string) bool {
		return filepath.Base(rel) == "work" && (filepath.Dir(rel) == rootFS || filepath.Dir(filepath.Dir(rel)) == filepath.Join(rootFS, "host"))
	}
	for _, d := range dataFolders {
		from := filepath.Join(src, d)
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		t := &treeCopy{src: from, dst: filepath.Join(dst, d), shift: shift, xattr: forkXattr, skip: func(rel string) bool { return skip(filepath.Join(d, rel)) }}
		if err := t.run(); err != nil {
			return err
		}
	}
	return nil
}

// copyMountConfigs copies the stored configurations of the bucket mounts
// of m from the sandbox folder src to dst.
func copyMountConfigs(src, dst string, m *meta) error {
	for _, r := range m.Mounts {
		in, err := os.Open(filepath.Join(mountFolder(src, r.Key), "config.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		err = os.MkdirAll(mountFolder(dst, r.Key), 0o700)
		if err == nil {
			err = disk.CopyFile(filepath.Join(mountFolder(dst, r.Key), "config.json"), in)
		}
		in.Close()
		if err != nil {
			return fmt.Errorf("copy the configuration of mount %s: %w", r.Path, err)
		}
	}
	return nil
}

// copyDiskImage copies the disk image of the sandbox folder src (metadata
// m; its file system synced first when it runs) to dst, holes kept (a
// reflink where the file system has them). Its files keep their owners:
// the fork mounts it ID-mapped (diskids_linux.go).
func copyDiskImage(src, dst string, m *meta) error {
	if m.alive() {
		if err := syncSandboxFS(m); err != nil {
			return err
		}
	}
	if err := copyFileAt(filepath.Join(src, diskImage), filepath.Join(dst, diskImage)); err != nil {
		return fmt.Errorf("copy the disk image: %w", err)
	}
	return nil
}

// syncSandboxFS writes to its disk image what the file system of the
// running sandbox m holds in memory: its home is on that file system.
func syncSandboxFS(m *meta) error {
	root, err := unix.Open("/proc/"+strconv.Itoa(m.Init.PID)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync the disk image: %w", err)
	}
	defer unix.Close(root)
	fd, err := openInRoot(root, m.Config.home(), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("sync the disk image: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("sync the disk image: %w", err)
	}
	return nil
}
