//go:build !linux

package daemon

// isPseudoFS reports whether dir is the root of a kernel pseudo file
// system; outside Linux none is recognised.
func isPseudoFS(dir string) bool { return false }
