package local

import (
	"context"
	"os"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/local/internal/cgroup"
	"github.com/agentbox-dev/agentbox/local/internal/uplink"
)

// reclaimStrays ends what a start of the sandbox folder dir (of state dir
// stateDir) left that m does not record, before killInit ends what m
// records: the init noted in pendingInitFile unless it is m's, and, when
// m records no cgroups, the cgroups named for the sandbox (with every
// process in them). The link of a stray init goes with its network
// namespace; its firewall table, and its place in the shared egress
// proxy when m is unknown, go here too.
func reclaimStrays(ctx context.Context, stateDir, dir string, m *meta) {
	stray := false
	if r, ok := pendingInit(dir); ok && (m.Init == nil || *m.Init != r) {
		terminate(ctx, r)
		stray = true
	}
	if m.Cgroups == nil {
		if set := cgroup.Existing(probeCgroups().Host, cgroup.Key(stateDir, m.ID)); set != nil {
			_ = set.Destroy(ctx)
			stray = true
		}
	}
	_ = os.Remove(filepath.Join(dir, pendingInitFile))
	if m.CreatedAt.IsZero() {
		// No metadata: whether it had an egress proxy is unknown.
		dropEgress(ctx, stateDir, m.ID)
	}
	if stray && hostMakesNetns() {
		if u, err := uplink.Open(ctx, ""); err == nil {
			_ = u.Cleanup() // the tables of links that are gone
			u.Close()
		}
	}
}
