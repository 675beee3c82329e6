package local

import "os"

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
	return inDisk(s, func(dir string) (*os.File, error) { return mountDiskOf(dir, &m) }, f)
}
