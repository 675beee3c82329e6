//go:build linux

package localtest

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Main is a TestMain: the test binary is re-executed as the sandboxes'
// init (local.Init), and the tests must leave no goroutine behind.
func Main(m *testing.M) {
	local.Init()
	goleak.VerifyTestMain(m)
}

// NewSandbox returns a local sandbox with the given id, without network,
// in a fresh state dir; it is not started yet and is destroyed when the
// test ends.
func NewSandbox(t testing.TB, id string) *local.Sandbox {
	t.Helper()
	sb, err := local.New(local.Options{ID: id, StateDir: t.TempDir(), Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy sandbox %s: %v", id, err)
		}
	})
	return sb
}
