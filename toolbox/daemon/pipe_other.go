//go:build !linux

package daemon

import "os"

// growPipe does nothing: only Linux can resize a pipe's buffer.
func growPipe(*os.File) {}
