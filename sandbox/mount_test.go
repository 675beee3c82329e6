package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// plainSandbox is a Sandbox that cannot mount.
type plainSandbox struct{ sandbox.Sandbox }

func (plainSandbox) Provider() string { return "plain" }

type bucket struct{}

func (bucket) Kind() string   { return "s3" }
func (bucket) String() string { return "s3://b" }

// The helpers report ErrUnsupported, in a *MountFailure naming the path,
// for a sandbox that is not a Mounter.
func TestMountHelpersUnsupported(t *testing.T) {
	ctx := context.Background()
	sb := plainSandbox{}
	err := sandbox.Mount(ctx, sb, bucket{}, "/data")
	var mf *sandbox.MountFailure
	if !errors.Is(err, sandbox.ErrUnsupported) || !errors.As(err, &mf) || mf.Path != "/data" || mf.Filesystem != "s3://b" {
		t.Fatalf("Mount = %v", err)
	}
	if err := sandbox.Unmount(ctx, sb, "/data"); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Unmount = %v", err)
	}
	if _, err := sandbox.Mounts(ctx, sb); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Mounts = %v", err)
	}
}
