package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
)

// HostIDsOf returns the first host uid of the sandbox's own range and of
// the range its disk image's files are stored with (meta.DiskIDs, or its
// own), as its metadata records them; 0 for none.
func HostIDsOf(s *Sandbox) (host, disk int) {
	m, err := readMeta(s.dir)
	if err != nil {
		return 0, 0
	}
	if m.HostIDs != nil {
		host = m.HostIDs.First
	}
	if d := m.diskIDs(); d != nil {
		disk = d.First
	}
	return host, disk
}

// InDiskAsStored calls f with the root of the stopped sandbox s's disk
// image, mounted for the call as it is stored: not ID-mapped.
func InDiskAsStored(s *Sandbox, f func(root string) error) error {
	return inDisk(s, mountDisk, f)
}

// inDisk calls f with the root of the disk image of the stopped sandbox
// s, mounted by mount for the call.
func inDisk(s *Sandbox, mount func(dir string) (*os.File, error), f func(root string) error) error {
	d, err := mount(s.dir)
	if err != nil {
		return err
	}
	err = f(filepath.Join("/proc/self/fd", strconv.Itoa(int(d.Fd()))))
	d.Close()
	if werr := waitDiskReleased(context.Background(), s.dir); err == nil {
		err = werr
	}
	return err
}
