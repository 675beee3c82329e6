//go:build linux

package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// UpdateResources changes the CPU and memory of a stopped sandbox, which
// its next start enforces, and refuses a running one and the disk.
func TestUpdateResources(t *testing.T) {
	sb := limitedSandbox(t, local.Resources{CPUCores: 0.5, MemoryMiB: 256}, local.Config{})
	ctx := context.Background()
	dir, id := sb.StateDir(), sb.ID()
	if err := sb.UpdateResources(ctx, local.Resources{CPUCores: 1}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("resizing a running sandbox: %v, want ErrInvalidArgument", err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.UpdateResources(ctx, local.Resources{DiskMiB: 1024}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("resizing the disk: %v, want ErrInvalidArgument", err)
	}
	if err := sb.UpdateResources(ctx, local.Resources{MemoryMiB: 1}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("too little memory: %v, want ErrInvalidArgument", err)
	}
	if err := sb.UpdateResources(ctx, local.Resources{CPUCores: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	// A handle that asks for no Config uses the sandbox as it is now.
	again, err := local.New(local.Options{StateDir: dir, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if _, err := again.Start(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := again.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Limits; l == nil || l.CPUCores != 1 || l.MemoryMB != 512 {
		t.Fatalf("limits after the change: %+v, want 1 core and 512 MiB", l)
	}
	if _, err := local.Open(ctx, dir, "no-such-sandbox"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("an unknown sandbox: %v, want ErrNotFound", err)
	}
}
