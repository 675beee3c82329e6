package local

import (
	"os"
	"path/filepath"
)

// DropDiskImage makes the stopped sandbox s one without a disk image, as
// sandboxes made before disk images, or on hosts without loop devices,
// are: its image goes (with the files on it) and its metadata says it has
// none, so its next start keeps its folders in its state folder.
func DropDiskImage(s *Sandbox) error {
	m, err := readMeta(s.dir)
	if err != nil {
		return err
	}
	if m.Limits != nil {
		m.Limits.DiskMB = 0
	}
	if err := os.Remove(filepath.Join(s.dir, diskImage)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return writeMeta(s.dir, &m)
}

// HostStamps returns the paths of the host's files of the init's exit
// record and activity stamp of s, which host processes read.
func HostStamps(s *Sandbox) (exit, activity string) {
	return filepath.Join(s.dir, toolboxDir, exitFile), filepath.Join(s.dir, toolboxDir, activityFile)
}
