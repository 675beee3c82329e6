//go:build !linux

package daemon

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// openPTY fails: PTY sessions are implemented for Linux only.
func openPTY() (master, slave *os.File, err error) {
	return nil, nil, fmt.Errorf("PTY sessions need Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func setWinsize(*os.File, int, int) error { return errors.ErrUnsupported }
