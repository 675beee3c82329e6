package daemon

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// dropThreadCapabilities empties the calling thread's ambient and
// inheritable capability sets, and its bounding set but for keep, and
// sets no_new_privs.
func dropThreadCapabilities(keep []int) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("daemon: setting no_new_privs: %w", err)
	}
	for c := 0; ; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if err == unix.EINVAL && c > 0 {
				break // past the last capability the kernel knows
			}
			return fmt.Errorf("daemon: dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("daemon: clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("daemon: reading capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("daemon: clearing inheritable capabilities: %w", err)
	}
	return nil
}
