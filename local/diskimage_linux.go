package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/local/internal/disk"
)

// A sandbox's disk limit: everything it writes but its volumes (home,
// /tmp, the working directory, the toolbox's logs) lives on an ext4 file
// system of its own, a sparse image file in its state folder (diskImage)
// of the sandbox's DiskMB, made and mounted by package disk from the
// templates in the state dir (templatesDir). At each start the host
// mounts the image detached; the init gets clones of its folders
// (open_tree) and binds them in place. So the mount lives in the
// sandbox's mount namespace only: when the init ends, however it ends,
// the kernel unmounts the file system and frees the loop device, and a
// host process that dies while it starts a sandbox leaves none behind
// either. Stop and Remove wait until the loop device is gone, so that the
// next start never mounts the image twice.

// probeDisk returns nil when this host can give sandboxes disk images,
// else why not.
func probeDisk() error {
	if os.Geteuid() != 0 || !shiftedMode() {
		return errors.New("disk limits need root (loop devices)")
	}
	return disk.Available()
}

// imageMB returns the size of the disk image of the sandbox folder dir, in
// MiB, or 0 when it has none.
func imageMB(dir string) int64 { return disk.SizeMB(filepath.Join(dir, diskImage)) }

// createImage makes the disk image of sizeMB MiB of the sandbox folder
// dir, a sparse copy of the template of that size in stateDir.
func createImage(dir, stateDir string, sizeMB int64) error {
	tpl, err := diskTemplate(stateDir, sizeMB)
	if err != nil {
		return err
	}
	return disk.Create(filepath.Join(dir, diskImage), tpl)
}

// diskTemplate returns the template image of sizeMB MiB in stateDir,
// formatting it first when there is none.
func diskTemplate(stateDir string, sizeMB int64) (string, error) {
	dir := filepath.Join(stateDir, templatesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", stateDirError(stateDir, err)
	}
	return disk.Template(dir, sizeMB)
}

// mountDisk mounts the disk image of the sandbox folder dir, detached: it
// returns the mount's root, which only its descriptors keep alive.
func mountDisk(dir string) (*os.File, error) { return disk.Mount(filepath.Join(dir, diskImage)) }

// waitDiskReleased waits until no loop device holds the disk image of the
// sandbox folder dir.
func waitDiskReleased(ctx context.Context, dir string) error {
	return disk.WaitReleased(ctx, filepath.Join(dir, diskImage))
}
