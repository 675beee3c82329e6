//go:build !linux

package local

// landlockABI returns 0: Landlock is Linux's.
func landlockABI() int { return 0 }

// FUSEAvailable reports false: FUSE inside sandboxes is Linux's.
func FUSEAvailable() bool { return false }
