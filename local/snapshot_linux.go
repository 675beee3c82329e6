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
// snapshot name: a new read-only layer, a copy of the sandbox's
// upper folder (the files it changed, made and deleted in its root, not
// its home, /tmp or volumes) over the layers of its image. A running
// sandbox keeps running: its processes are frozen during the copy, so
// that the copy is consistent (where its cgroups have no freezer, it is
// stopped first and left stopped, as before). The copy gives files the
// owners they have inside the sandbox (its host ids shifted back to
// 0-based ones) and keeps overlayfs's deletion marks. [Config.Snapshot]
// creates sandboxes from it. It fails with an error matching
// image.ErrExists when the name is taken, and [sandbox.ErrInvalidArgument]
// when the sandbox was created without an Image or Snapshot (its root is
// not made of an image).
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
	if m.Root == nil || m.Root.Host {
		return nil, fmt.Errorf("%w: sandbox %s is not made of an image (its root is the host's system folders): only a sandbox created with an Image or a Snapshot can be snapshotted", sandbox.ErrInvalidArgument, id)
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
	layer, err := liveFreeze(ctx, st, l.path, &m)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s of sandbox %s: %w", name, id, err)
	}
	return st.Save(ctx, &image.Image{
		Kind:   image.KindSnapshot,
		Names:  []string{name},
		Layers: append(slices.Clone(m.Root.Layers), layer),
		Config: m.Root.Config,
		Base:   m.Root.Image,
	})
}

// stopAndFreeze stops the sandbox of the locked folder dir (metadata m)
// when it runs, and copies its upper folder into a new layer of st
// (freezeUpper).
func stopAndFreeze(ctx context.Context, st imageStore, dir string, m *meta) (string, error) {
	if m.alive() {
		if err := stopLocked(ctx, dir, m); err != nil {
			return "", err
		}
	}
	return freezeUpper(ctx, st, dir, m.HostIDs)
}

// liveFreeze copies the upper folder of the locked sandbox folder dir
// (metadata m) into a new layer of st, as stopAndFreeze does, but leaves
// a running sandbox running: frozen during the copy. Without a freezer
// it is stopped first (stopAndFreeze).
func liveFreeze(ctx context.Context, st imageStore, dir string, m *meta) (layer string, err error) {
	if !m.alive() {
		return freezeUpper(ctx, st, dir, m.HostIDs)
	}
	thaw, err := freezeSandbox(ctx, m)
	if errors.Is(err, sandbox.ErrUnsupported) {
		return stopAndFreeze(ctx, st, dir, m)
	}
	if err != nil {
		return "", err
	}
	thawed := false
	defer func() {
		if !thawed {
			if terr := thaw(context.WithoutCancel(ctx)); terr != nil && err == nil {
				err = fmt.Errorf("thaw the sandbox: %w", terr)
			}
		}
	}()
	if imageMB(dir) == 0 {
		return upperLayer(ctx, st, dir, m.HostIDs)
	}
	// Its disk image is mounted by the sandbox: copy it, let the sandbox
	// go on, and read the copy.
	if err := syncSandboxFS(m); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, "snapshot-"+diskImage)
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	if err := copyFileAt(filepath.Join(dir, diskImage), tmp); err != nil {
		return "", fmt.Errorf("copy the disk image: %w", err)
	}
	thawed = true
	if err := thaw(context.WithoutCancel(ctx)); err != nil {
		return "", fmt.Errorf("thaw the sandbox: %w", err)
	}
	d, err := disk.Mount(tmp)
	if err != nil {
		return "", err
	}
	defer func() {
		d.Close()
		_ = disk.WaitReleased(context.WithoutCancel(ctx), tmp)
	}()
	return upperLayer(ctx, st, "/proc/self/fd/"+strconv.Itoa(int(d.Fd())), m.HostIDs)
}

// freezeLayer stops the sandbox id of stateDir, whose root is made of an
// image, and copies what it changed in its root into a new layer of the
// state dir's image store, which it returns.
func freezeLayer(ctx context.Context, stateDir, id string) (string, error) {
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
	return stopAndFreeze(ctx, st, l.path, &m)
}

// freezeUpper copies the upper folder of the stopped sandbox folder dir
// (on its disk image when it has one) into a new layer of st, with owners
// shifted from ids back to 0-based ones, and returns the layer.
func freezeUpper(ctx context.Context, st imageStore, dir string, ids *idRange) (string, error) {
	data := dir
	if imageMB(dir) > 0 {
		disk, err := mountDisk(dir)
		if err != nil {
			return "", err
		}
		data = "/proc/self/fd/" + strconv.Itoa(int(disk.Fd()))
		defer func() {
			disk.Close()
			_ = waitDiskReleased(ctx, dir) // the next start mounts it again
		}()
	}
	return upperLayer(ctx, st, data, ids)
}

// upperLayer copies the upper folder of the root of the data folder data
// (a sandbox's state folder, or its disk image's root) into a new layer
// of st, with owners shifted from ids back to 0-based ones, and returns
// the layer.
func upperLayer(ctx context.Context, st imageStore, data string, ids *idRange) (string, error) {
	upper := filepath.Join(data, rootFS, "upper")
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
