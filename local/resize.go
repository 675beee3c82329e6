package local

import (
	"context"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// UpdateResources changes the CPU and memory limits of the stopped
// sandbox: r's CPUCores and MemoryMiB that are not 0 replace the
// sandbox's (as [Resources] has them) in its Config, and its next start
// enforces them. The disk's size is fixed when a sandbox is created and
// the process count is not Daytona's to change: r with DiskMiB or PIDs set
// is refused, and so is a running sandbox (stop it first), with errors
// matching sandbox.ErrInvalidArgument. It fails with an error matching
// sandbox.ErrNotFound when there is no such sandbox.
func (s *Sandbox) UpdateResources(ctx context.Context, r Resources) error {
	id := s.opts.ID
	if r.DiskMiB != 0 || r.PIDs != 0 {
		return fmt.Errorf("%w: Resources: only CPUCores and MemoryMiB of a sandbox can change; its disk's size is fixed when it is created", sandbox.ErrInvalidArgument)
	}
	return withLockedMeta(ctx, s.opts.StateDir, id, func(_ string, m *meta) error {
		if m.alive() {
			return fmt.Errorf("%w: sandbox %q is running: stop it to change its CPU and memory", sandbox.ErrInvalidArgument, id)
		}
		next := m.Config.Resources
		if r.CPUCores != 0 {
			next.CPUCores = r.CPUCores
		}
		if r.MemoryMiB != 0 {
			next.MemoryMiB = r.MemoryMiB
		}
		next, err := normalizeResources(next)
		if err != nil {
			return err
		}
		m.Config.Resources = next
		return nil
	})
}
