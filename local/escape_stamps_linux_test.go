//go:build linux

package local_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
)

// TestEscapeActivityStampNoDisk: the host reads a sandbox's last use (the
// idle timers of serve, the auto-stop of a paused sandbox) from the mtime
// of its activity stamp, and its exit from its exit record. A sandbox
// without a disk image had the host's files of both in its /run/agentbox,
// so a command could date its last use in 2100 (never idle) or write its
// own exit record. Touching /run/agentbox must leave the host's files alone.
func TestEscapeActivityStampNoDisk(t *testing.T) {
	needRoot(t)
	sb := newSandbox(t, local.Options{StateDir: newStateDir(t)})
	ctx := context.Background()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, local.DropDiskImage(sb))
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const future = 4102444800 // 2100-01-01
	out := mustRun(t, sb, `touch -d @4102444800 /run/agentbox/last-used && echo '{"code":77,"marker":"FORGED"}' > /run/agentbox/exit.json && stat -c %Y /run/agentbox/last-used`)
	if strings.TrimSpace(out) != "4102444800" {
		t.Fatalf("control: the sandbox's own /run/agentbox/last-used has mtime %q, want %d (the probe did not run)", out, future)
	}
	exit, activity := local.HostStamps(sb)
	fi, err := os.Lstat(activity)
	if err != nil {
		t.Fatal(err)
	}
	if fi.ModTime().After(time.Now().Add(time.Hour)) {
		t.Errorf("the host's activity stamp %s has mtime %s: the sandbox set it", activity, fi.ModTime())
	}
	if b, _ := os.ReadFile(exit); strings.Contains(string(b), "FORGED") {
		t.Errorf("the host's exit record %s holds what the sandbox wrote: %q", exit, b)
	}
}
