package local

import (
	"context"
	"path/filepath"
	"strconv"
)

// InData calls f with the data folder of the stopped sandbox s (the root
// of its disk image, mounted for the call, or its state folder), as a
// command of the sandbox would have left it.
func InData(s *Sandbox, f func(data string) error) error {
	if imageMB(s.dir) == 0 {
		return f(s.dir)
	}
	m, err := readMeta(s.dir)
	if err != nil {
		return err
	}
	disk, err := mountDiskOf(s.dir, &m)
	if err != nil {
		return err
	}
	err = f(filepath.Join("/proc/self/fd", strconv.Itoa(int(disk.Fd()))))
	disk.Close()
	if werr := waitDiskReleased(context.Background(), s.dir); err == nil {
		err = werr
	}
	return err
}
