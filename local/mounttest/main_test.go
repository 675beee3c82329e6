//go:build linux

// Package mounttest_test tests the local engine's bucket mounts (s3fs,
// gcsfuse) end to end. The tests live outside package local's folder
// for one reason: they read and write the buckets through package
// mount/bucket and serve GCS with fake-gcs-server, which link Google's
// storage client and its gRPC and telemetry stack. A test binary is also
// the init of the sandboxes its tests start (local.Init), re-executed at
// each start, so linking those into package local's tests would slow
// every sandbox start of its suite and of its benchmarks by their
// package inits (about 30 ms).
package mounttest_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestMain(m *testing.M) {
	local.Init()
	// fake-gcs-server's dependencies start OpenCensus's worker at init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// newStateDir returns a fresh state dir whose sandboxes are all removed
// when the test ends.
func newStateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		ctx := context.Background()
		infos, _ := local.List(ctx, dir)
		for _, info := range infos {
			if err := localtest.Destroy(ctx, dir, info.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("remove sandbox %s left by the test: %v", info.ID, err)
			}
		}
	})
	return dir
}

// newSandbox returns a started sandbox made by local.New (in a fresh
// state dir unless opts has one), destroyed when the test ends.
func newSandbox(t testing.TB, opts local.Options) *local.Sandbox {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = newStateDir(t)
	}
	sb, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	if _, err := sb.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return sb
}

// run runs command in sb and returns its result.
func run(t testing.TB, sb sandbox.Sandbox, command string) *sandbox.CommandResult {
	t.Helper()
	r, err := sb.ExecuteCommand(context.Background(), command, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return r
}

// mustRun is run that also requires exit code 0 and returns stdout.
func mustRun(t testing.TB, sb sandbox.Sandbox, command string) string {
	t.Helper()
	r := run(t, sb, command)
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", command, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
