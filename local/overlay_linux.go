package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// writableRootAvailable reports whether sandboxes may have a root made of
// an image: the host mounts the overlay, with ID-mapped layers, as root.
func writableRootAvailable() bool { return shiftedMode() }

// mountRoot mounts, detached, the writable root of a sandbox made of the
// image r: an overlay of r's layers, each ID-mapped with the sandbox's
// user namespace, under the upper and work folders of the data folder
// (its disk image's root, or its state folder), and returns the mount.
// The host mounts it as root, so the overlay keeps its own xattrs
// (trusted.overlay.*), as the image store writes them; commands still
// reach its files with their own credentials only.
func mountRoot(r *rootRecord, data string, own *ownership) (*os.File, error) {
	f, err := mountOverlay(r.Layers, filepath.Join(data, rootFS), own)
	if err != nil {
		return nil, fmt.Errorf("writable root: %w", err)
	}
	return f, nil
}

// mountOverlay mounts, detached, an overlay of the layer folders layers
// (lowest first), each ID-mapped with the sandbox's user namespace, with
// its upper and work folders in dir ("upper", "work"), and returns the
// mount.
func mountOverlay(layers []string, dir string, own *ownership) (*os.File, error) {
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(upper, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := os.Lchown(upper, own.owner(), own.owner()); err != nil {
		return nil, err
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("overlayfs: %w", err)
	}
	defer unix.Close(fsfd)
	// Each lowerdir+ goes below the ones before: the top layer first. The
	// layers' detached mounts must live until the overlay is made (it
	// clones them then): they are closed on return.
	for i := len(layers) - 1; i >= 0; i-- {
		fd, err := setLayer(fsfd, layers[i], own)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
	}
	for _, o := range [][2]string{{"upperdir", upper}, {"workdir", work}} {
		if err := setFolder(fsfd, o[0], o[1], -1); err != nil {
			return nil, err
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("mount the overlay: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("mount the overlay: %w", err)
	}
	return os.NewFile(uintptr(mfd), "overlay"), nil
}

// setLayer adds the layer folder dir, read-only and ID-mapped with the
// sandbox's user namespace, as the overlay fsfd's next lower layer, and
// returns the layer's detached mount.
func setLayer(fsfd int, dir string, own *ownership) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("image layer %s: %w", dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(own.userns.Fd())}
	if err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		err = fmt.Errorf("image layer %s: ID-mapped mount: %w", dir, err)
	} else {
		err = setFolder(fsfd, "lowerdir+", dir, fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// setFolder sets the overlay option key of fsfd to the folder fd (when
// >= 0) or path.
func setFolder(fsfd int, key, path string, fd int) error {
	if fd < 0 {
		var err error
		if fd, err = unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		defer unix.Close(fd)
	}
	if err := unix.FsconfigSetFd(fsfd, key, fd); err != nil {
		return fmt.Errorf("overlay %s %s: %w", key, path, err)
	}
	return nil
}
