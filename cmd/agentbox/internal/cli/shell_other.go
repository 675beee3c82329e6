//go:build !unix

package cli

import (
	"errors"
	"fmt"
	"io"
	"runtime"
)

// openTerminal fails: agentbox shell drives unix terminals only.
func openTerminal(io.Reader) (terminal, error) {
	return nil, fmt.Errorf("agentbox shell is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
