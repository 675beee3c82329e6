package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/internal/disk"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// CreateSnapshot freezes the writable root of the sandbox into the
// snapshot name: new read-only layers, copies of the sandbox's upper
// folders (the files it changed, made and deleted in its root, not its
// home, /tmp or volumes) over the layers of its root. A running sandbox
// keeps running: its processes are frozen during the copy, so that the
// copy is consistent (where its cgroups have no freezer, it is stopped
// first and left stopped). The copy gives files the owners they have
// inside the sandbox (its host ids shifted back to 0-based ones) and keeps
// overlayfs's deletion marks. For a sandbox whose root is made of the
// host's system folders, the snapshot holds that root's base and the
// upper folder of each of its overlays (/usr and the others): a sandbox
// made of it has the host's folders with those changes.
// [Config.Snapshot] creates sandboxes from it. It fails with an error
// matching image.ErrExists when the name is taken, and
// [sandbox.ErrInvalidArgument] when the sandbox's root is the host's,
// read-only (Config.ReadOnlyRoot, or not created by root).
func (s *Sandbox) CreateSnapshot(ctx context.Context, name string) (*image.Image, error) {
	if err := ValidateID(name); err != nil {
		return nil, fmt.Errorf("snapshot name: %w", err)
	}
	id := s.opts.ID
	stateDir, l, err := lockExisting(ctx, s.opts.StateDir, id)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	m, err := readMeta(l.path)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	if m.Root == nil {
		return nil, fmt.Errorf("%w: sandbox %s has the host's system folders as its root, read-only: only a sandbox with a writable root (an Image, a Snapshot, or the host's folders as root) can be snapshotted", sandbox.ErrInvalidArgument, id)
	}
	st, err := openImages(stateDir)
	if err != nil {
		return nil, err
	}
	if _, err := st.Get(ctx, name); err == nil {
		return nil, fmt.Errorf("snapshot %s: %w: choose another name or remove it first", name, image.ErrExists)
	} else if !errors.Is(err, image.ErrNotFound) {
		return nil, err
	}
	img := &image.Image{Kind: image.KindSnapshot, Names: []string{name}, Config: m.Root.Config, Base: m.Root.Image}
	err = withFrozenData(ctx, l.path, &m, false, func(data string) error {
		if m.Root.Host {
			img.Layers, img.HostOverlays, err = hostSnapshotLayers(ctx, st, data, m.Root, m.HostIDs)
			return err
		}
		layer, err := upperLayer(ctx, st, data, m.HostIDs)
		img.Layers = append(slices.Clone(m.Root.Layers), layer)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s of sandbox %s: %w", name, id, err)
	}
	return st.Save(ctx, img)
}

// withFrozenData runs fn on the data folder of the locked sandbox folder
// dir (metadata m) with the sandbox's files at rest: a stopped sandbox's
// (its disk image mounted, when it has one); a running one's while it is
// frozen (a copy of its disk image, taken frozen, when it has one), which
// keeps running. A running sandbox is stopped first, and left stopped,
// with stop or without a freezer.
func withFrozenData(ctx context.Context, dir string, m *meta, stop bool, fn func(data string) error) (err error) {
	if m.alive() && !stop {
		thaw, ferr := freezeSandbox(ctx, m)
		if ferr == nil {
			return frozenData(ctx, dir, m, thaw, fn)
		}
		if !errors.Is(ferr, sandbox.ErrUnsupported) {
			return ferr
		}
	}
	if m.alive() {
		if err := stopLocked(ctx, dir, m); err != nil {
			return err
		}
	}
	return atRest(ctx, dir, diskImage, m, fn)
}

// frozenData runs fn on the data folder of the frozen sandbox folder dir
// (metadata m), then thaws it; with a disk image, fn gets a copy of the
// image, taken frozen (the sandbox has the image mounted), and the
// sandbox runs again once it is made.
func frozenData(ctx context.Context, dir string, m *meta, thaw func(context.Context) error, fn func(data string) error) (err error) {
	thawed := false
	defer func() {
		if !thawed {
			if terr := thaw(context.WithoutCancel(ctx)); terr != nil && err == nil {
				err = fmt.Errorf("thaw the sandbox: %w", terr)
			}
		}
	}()
	if imageMB(dir) == 0 {
		return fn(dir)
	}
	if err := syncSandboxFS(m); err != nil {
		return err
	}
	tmp := "snapshot-" + diskImage
	_ = os.Remove(filepath.Join(dir, tmp))
	defer os.Remove(filepath.Join(dir, tmp))
	if err := copyFileAt(filepath.Join(dir, diskImage), filepath.Join(dir, tmp)); err != nil {
		return fmt.Errorf("copy the disk image: %w", err)
	}
	thawed = true
	if err := thaw(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("thaw the sandbox: %w", err)
	}
	return atRest(ctx, dir, tmp, m, fn)
}

// atRest runs fn on the data folder of the sandbox folder dir (metadata
// m), whose files are not in use: dir itself, or the root of its disk
// image img (a file of dir), mounted meanwhile (ID-mapped as the sandbox
// mounts it: mountSandboxDisk), when it exists.
func atRest(ctx context.Context, dir, img string, m *meta, fn func(data string) error) error {
	p := filepath.Join(dir, img)
	if disk.SizeMB(p) <= 0 {
		return fn(dir)
	}
	d, err := mountSandboxDisk(p, m)
	if err != nil {
		return err
	}
	defer func() {
		d.Close()
		_ = disk.WaitReleased(context.WithoutCancel(ctx), p) // the next start mounts it again
	}()
	return fn("/proc/self/fd/" + strconv.Itoa(int(d.Fd())))
}

// freezeLayer stops the sandbox id of stateDir, whose root is made of an
// image, and copies what it changed in its root into a new layer of the
// state dir's image store, which it returns.
func freezeLayer(ctx context.Context, stateDir, id string) (layer string, err error) {
	stateDir, l, err := lockExisting(ctx, stateDir, id)
	if err != nil {
		return "", err
	}
	defer l.unlock()
	m, err := readMeta(l.path)
	if err != nil {
		return "", fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	if m.Root == nil || m.Root.Host {
		return "", fmt.Errorf("%w: sandbox %s is not made of an image", sandbox.ErrInvalidArgument, id)
	}
	st, err := openImages(stateDir)
	if err != nil {
		return "", err
	}
	err = withFrozenData(ctx, l.path, &m, true, func(data string) error {
		layer, err = upperLayer(ctx, st, data, m.HostIDs)
		return err
	})
	return layer, err
}

// upperLayer copies the upper folder of the root of the data folder data
// (a sandbox's state folder, or its disk image's root) into a new layer
// of st, with owners shifted from ids back to 0-based ones, and returns
// the layer.
func upperLayer(ctx context.Context, st imageStore, data string, ids *idRange) (string, error) {
	return layerOf(ctx, st, filepath.Join(data, rootFS, "upper"), ids)
}

// layerOf copies the upper folder upper (none: the sandbox never started)
// into a new layer of st, owners shifted from ids to 0-based ones.
func layerOf(ctx context.Context, st imageStore, upper string, ids *idRange) (string, error) {
	if _, err := os.Lstat(upper); errors.Is(err, fs.ErrNotExist) {
		upper = "" // never started: an empty layer
	}
	return st.AddLayer(ctx, func(layer string) error {
		if upper == "" {
			return nil
		}
		return copyShifted(upper, layer, ids)
	})
}

// copyShifted copies the overlayfs upper folder src into the empty
// folder dst (copyTree): owners in the range ids shifted to 0-based ones
// (others become 0), overlayfs's opaque marks and user.* xattrs kept. src
// is not in use (its sandbox is stopped or frozen).
func copyShifted(src, dst string, ids *idRange) error {
	t := &treeCopy{src: src, dst: dst, shift: shiftToZero(ids), xattr: snapshotXattr}
	return t.run()
}

// copyFileAt copies the file src to the new file dst, holes kept.
func copyFileAt(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return disk.CopyFile(dst, in)
}

// copyFile copies the regular file src to the new file dst, holes kept
// (disk.CopyFile): a sparse file of the sandbox costs the layer only what it
// holds. src is opened without following a link or waiting on a FIFO,
// and must still be a regular file.
func copyFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	return disk.CopyFile(dst, in)
}

// copyXattrs copies the xattrs of src that keep names to dst (neither
// followed if a link).
func copyXattrs(src, dst string, keep func(name string) bool) error {
	size, err := unix.Llistxattr(src, nil)
	if err != nil || size == 0 {
		return nil // none, or a file system without xattrs
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(src, buf); err != nil {
		return err
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if !keep(name) {
			continue
		}
		val := make([]byte, 4096)
		n, err := unix.Lgetxattr(src, name, val)
		if err != nil {
			return fmt.Errorf("read xattr %s of %s: %w", name, src, err)
		}
		if err := unix.Lsetxattr(dst, name, val[:n], 0); err != nil {
			return fmt.Errorf("copy xattr %s: %w", name, err)
		}
	}
	return nil
}
