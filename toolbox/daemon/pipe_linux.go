package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the buffer size growPipe asks for.
const pipeSize = 1 << 20

// growPipe enlarges a pipe's buffer so that fast writers block less and
// reads come in bigger chunks. Failure is harmless.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}
