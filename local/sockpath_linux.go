package local

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// shortPath returns a path naming dir/name that fits in a unix socket
// address: dir/name itself when short enough, else a path through a
// /proc/self/fd link to dir, valid until release is called.
func shortPath(dir, name string) (p string, release func(), err error) {
	full := filepath.Join(dir, name)
	if len(full) <= maxSocketPath {
		return full, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, name), func() { unix.Close(fd) }, nil
}
