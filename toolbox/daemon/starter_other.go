//go:build !linux

package daemon

import (
	"errors"
	"fmt"
	"runtime"
)

// dropThreadCapabilities fails: capabilities and no_new_privs are Linux's.
func dropThreadCapabilities([]int) error {
	return fmt.Errorf("daemon: Options.DropCapabilities needs Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
