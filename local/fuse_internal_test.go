//go:build linux

package local

import (
	"testing"

	"github.com/agentbox-dev/agentbox/local/internal/fuse"
)

// TestFUSEForbidden: no FUSE mount goes on a forbidden folder, in one, or
// on an ancestor of one (it would hide it), while other folders are open.
func TestFUSEForbidden(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/proc": true, "/proc/sys": true, "/sys": true, "/dev": true, "/dev/shm": true,
		"/run": true, "/run/agentbox": true, "/run/agentbox/x": true,
		"/run/user": false, "/runx": false, "/tmp": false, "/home/user/mnt": false, "/devices": false, "/procs": false,
	} {
		if got := fuse.Covers(p, fuseForbiddenTargets); got != want {
			t.Errorf("fuse.Covers(%q, fuseForbiddenTargets) = %v, want %v", p, got, want)
		}
	}
}
