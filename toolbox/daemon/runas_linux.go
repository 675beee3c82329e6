package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// setFSIDs sets the calling thread's file system uid and gid (Linux keeps
// them per thread), and checks that they took.
func setFSIDs(uid, gid int) error {
	_ = unix.Setfsgid(gid)
	_ = unix.Setfsuid(uid)
	// setfsuid answers the previous id, never an error: ask again.
	if gotUID, gotGID := fsIDs(); gotUID != uid || gotGID != gid {
		return fmt.Errorf("file system ids are %d:%d, not %d:%d", gotUID, gotGID, uid, gid)
	}
	return nil
}

// fsIDs returns the calling thread's file system uid and gid.
func fsIDs() (uid, gid int) {
	// An invalid id changes nothing and answers the current one.
	gid, _ = unix.SetfsgidRetGid(-1)
	uid, _ = unix.SetfsuidRetUid(-1)
	return uid, gid
}
