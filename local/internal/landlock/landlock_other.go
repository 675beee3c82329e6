//go:build !linux

package landlock

// ABI returns 0: Landlock is Linux's.
func ABI() int { return 0 }
