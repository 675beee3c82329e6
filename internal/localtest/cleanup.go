package localtest

import (
	"context"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Lookup describes the sandbox id of stateDir through its handle
// (local.Open, then Info). The error matches sandbox.ErrNotFound when
// there is no such sandbox.
func Lookup(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	sb, err := local.Open(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return sb.Info(ctx)
}

// Destroy removes the sandbox id of stateDir through its handle
// (local.Open, then Destroy). The error matches sandbox.ErrNotFound when
// there is no such sandbox.
func Destroy(ctx context.Context, stateDir, id string) error {
	sb, err := local.Open(ctx, stateDir, id)
	if err != nil {
		return err
	}
	return sb.Destroy(ctx)
}

// CheckNoneLeft fails t for each sandbox left in stateDir, and removes
// it: a test that ends with sandboxes in its state dir leaked them.
func CheckNoneLeft(t testing.TB, stateDir string) {
	t.Helper()
	ctx := context.Background()
	infos, err := local.List(ctx, stateDir)
	if err != nil {
		t.Errorf("listing the sandboxes left: %v", err)
	}
	for _, info := range infos {
		t.Errorf("sandbox %s left behind", info.ID)
		if err := Destroy(ctx, stateDir, info.ID); err != nil {
			t.Errorf("removing %s: %v", info.ID, err)
		}
	}
}
