//go:build !linux

package local

// FUSEAvailable reports false: FUSE inside sandboxes is Linux's.
func FUSEAvailable() bool { return false }
