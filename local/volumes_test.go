//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// A volume a sandbox names cannot be removed; once the sandbox is gone it
// can, with its files, and a new sandbox gets it empty.
func TestRemoveVolume(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	cfg := local.Config{Volumes: []local.Volume{{Name: "data", MountPath: "/data"}}}
	sb := newSandbox(t, local.Options{ID: "vol-user", StateDir: stateDir, Config: cfg})
	mustRun(t, sb, "echo kept > /data/f")
	err := local.RemoveVolume(ctx, stateDir, "data")
	if !errors.Is(err, local.ErrVolumeInUse) || !strings.Contains(err.Error(), "vol-user") {
		t.Fatalf("RemoveVolume of a used volume = %v; want ErrVolumeInUse naming vol-user", err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := local.RemoveVolume(ctx, stateDir, "data"); !errors.Is(err, local.ErrVolumeInUse) {
		t.Fatalf("RemoveVolume of a volume a stopped sandbox names = %v; want ErrVolumeInUse", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := local.RemoveVolume(ctx, stateDir, "data"); err != nil {
		t.Fatalf("RemoveVolume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "volumes", "data")); !os.IsNotExist(err) {
		t.Errorf("the volume's folder is still there: %v", err)
	}
	if err := local.RemoveVolume(ctx, stateDir, "data"); err != nil {
		t.Errorf("RemoveVolume of a missing volume = %v; want nil", err)
	}
	if err := local.RemoveVolume(ctx, stateDir, "../x"); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("RemoveVolume(../x) = %v; want ErrInvalidArgument", err)
	}
	sb2 := newSandbox(t, local.Options{ID: "vol-next", StateDir: stateDir, Config: cfg})
	if out := mustRun(t, sb2, "ls -A /data"); out != "" {
		t.Errorf("the volume made again holds %q", out)
	}
}

// DialToolbox reaches a running sandbox's toolbox server; an unknown id is
// ErrNotFound.
func TestDialToolbox(t *testing.T) {
	ctx := context.Background()
	stateDir := newStateDir(t)
	newSandbox(t, local.Options{ID: "dial", StateDir: stateDir})
	c, err := opened(t, stateDir, "dial").DialToolbox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /version HTTP/1.0\r\nHost: sandbox\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /version through DialToolbox: %s", resp.Status)
	}
	if _, err := local.Open(ctx, stateDir, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("DialToolbox of an unknown sandbox = %v; want ErrNotFound", err)
	}
}
