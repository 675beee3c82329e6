// Package rodir makes folders that the test process cannot write into,
// for tests of how programs report an unwritable folder.
//
// Root ignores permission bits, so for root a folder is made read-only
// by binding it onto itself read-only (Linux); other users get mode 0500.
package rodir

import (
	"os"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Make makes dir read-only for this process until the test ends, and
// restores it then. A test run as root where bind mounts are unavailable
// is skipped, or fails when AGENTBOX_REQUIRE_ALL=1.
func Make(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return
	}
	if err := bindReadOnly(t, dir); err != nil {
		testenv.Skipf(t, "cannot make a read-only bind mount: %v", err)
	}
}

// New returns a new temporary folder made read-only with [Make].
func New(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	Make(t, dir)
	return dir
}
