//go:build !linux

package daemon

import (
	"errors"
	"os"
)

// setFSIDs fails: only Linux has per-thread file system ids.
func setFSIDs(uid, gid int) error {
	return errors.New("running as another user needs Linux")
}

// fsIDs returns the process's effective ids.
func fsIDs() (uid, gid int) { return os.Geteuid(), os.Getegid() }
