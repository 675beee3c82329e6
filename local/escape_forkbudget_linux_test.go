//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestEscapeForkDiskBudget: a fork's disk image is a full-size copy of
// its source's, counted like any against the state dir's disk budget, so
// that forks of forks cannot commit more disk than the host has: a fork
// that does not fit is refused with ErrDiskBudget and nothing is made.
func TestEscapeForkDiskBudget(t *testing.T) {
	testenv.NeedRoot(t, "disk limits need root")
	ctx := context.Background()
	state := newStateDir(t)
	src := openSandbox(t, local.Options{ID: "src", StateDir: state, DiskBudgetMB: 200, Config: local.Config{Resources: local.Resources{DiskMiB: 128}}})
	if _, err := src.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := src.Fork(ctx, sandbox.ForkOptions{ID: "fork"})
	if err == nil {
		_ = f.Destroy(ctx)
		t.Fatal("a fork of a 128 MiB disk with 72 MiB of a 200 MiB budget left was made, want ErrDiskBudget")
	}
	if !errors.Is(err, local.ErrDiskBudget) {
		t.Fatalf("a fork beyond the budget: %v, want ErrDiskBudget", err)
	}
	if _, err := os.Stat(filepath.Join(state, "sandboxes", "fork")); !os.IsNotExist(err) {
		t.Errorf("the refused fork's folder: %v, want none", err)
	}
}
