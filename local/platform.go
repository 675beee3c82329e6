package local

import (
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// checkPlatform returns an error matching sandbox.ErrIsolationUnavailable
// unless goos (runtime.GOOS) can run local sandboxes: they need Linux's
// namespaces and cgroups. The Linux-only parts of the package live in
// _linux.go files; other systems get the stubs of other.go, which New
// never lets run.
func checkPlatform(goos string) error {
	if goos == "linux" {
		return nil
	}
	return fmt.Errorf("%w: local sandboxes need Linux (user, mount and pid namespaces, cgroups), and this program runs on %s; run it on Linux", sandbox.ErrIsolationUnavailable, goos)
}
