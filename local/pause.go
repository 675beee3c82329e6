package local

import (
	"context"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// freezeSandbox freezes every process of the running sandbox whose
// metadata is m, its init included, for a consistent copy of its files
// (a fork, a live snapshot), and returns the function that lets them run
// again. A paused sandbox stays paused: its thaw does nothing. Without a
// freezer (no cgroups: not root; or cgroups made before sandboxes got a
// freezer) it fails with an error matching sandbox.ErrUnsupported; for a
// sandbox that is not running, with one matching sandbox.ErrInvalidState.
func freezeSandbox(ctx context.Context, m *meta) (thaw func(context.Context) error, err error) {
	if !m.alive() {
		return nil, fmt.Errorf("freeze sandbox %s: %w: it is not running", m.ID, sandbox.ErrInvalidState)
	}
	if m.Cgroups == nil {
		return nil, fmt.Errorf("freeze sandbox %s: %w: it has no cgroups (sandboxes get them when the engine runs as root)", m.ID, sandbox.ErrUnsupported)
	}
	if m.Cgroups.Frozen() {
		return func(context.Context) error { return nil }, nil
	}
	if err := m.Cgroups.Freeze(ctx); err != nil {
		return nil, fmt.Errorf("freeze sandbox %s: %w", m.ID, err)
	}
	return m.Cgroups.Thaw, nil
}
