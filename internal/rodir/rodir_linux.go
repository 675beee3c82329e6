package rodir

import (
	"testing"

	"golang.org/x/sys/unix"
)

// bindReadOnly binds dir onto itself read-only and undoes it when the
// test ends.
func bindReadOnly(t testing.TB, dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}
