//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// leftovers lists host processes of the sandbox running needle (all of
// them, not shells that mention it).
func leftovers(ns, needle string) []string {
	var out []string
	for _, cmd := range procsInNS(ns) {
		if strings.HasPrefix(cmd, needle) {
			out = append(out, cmd)
		}
	}
	return out
}

// waitNoLeftovers polls until no process matches (the kill is
// asynchronous for a moment at most).
func waitNoLeftovers(t *testing.T, ns, needle string) {
	t.Helper()
	if !poll(3*time.Second, func() bool { return len(leftovers(ns, needle)) == 0 }) {
		t.Errorf("processes left behind: %q", leftovers(ns, needle))
	}
}

// waitRunning polls, for 3s at most, until n processes of the sandbox run
// needle, and returns how many run.
func waitRunning(ns, needle string, n int) int {
	poll(3*time.Second, func() bool { return len(leftovers(ns, needle)) >= n })
	return len(leftovers(ns, needle))
}

// tree starts a background child, a grandchild and a daemonised (setsid)
// child, each a sleep with a tag, then waits.
func tree(tag string) string {
	return "sleep 40" + tag + "1 & bash -c 'sleep 40" + tag + "2 & wait' & setsid sleep 40" + tag + "3 & sleep 40" + tag + "4"
}

func TestTimeoutLeavesNoProcess(t *testing.T) {
	sb := newSandbox(t, local.Options{})
	ns := pidNS(local.InitPID(sb))
	// The command runs in the background of this goroutine; the timeout
	// is long enough to see all 4 sleeps running first.
	type result struct {
		r   *sandbox.CommandResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := sb.ExecuteCommand(context.Background(), tree("11"), nil, &sandbox.ExecOptions{Timeout: 1500 * time.Millisecond})
		done <- result{r, err}
	}()
	n := waitRunning(ns, "sleep 4011", 4)
	res := <-done
	if n != 4 {
		t.Fatalf("%d of 4 sleeps started before the timeout", n)
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if !res.r.TimedOut || res.r.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("result %+v, want a timeout (exit 124)", res.r)
	}
	waitNoLeftovers(t, ns, "sleep 4011")
}

func TestKillLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{})
	ns := pidNS(local.InitPID(sb))
	p, err := sb.Processes().Spawn(ctx, tree("22"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := waitRunning(ns, "sleep 4022", 4); n != 4 {
		t.Fatalf("%d of 4 sleeps started", n)
	}
	if ok, err := p.Kill(ctx); err != nil || !ok {
		t.Fatalf("kill: %v %v", ok, err)
	}
	waitNoLeftovers(t, ns, "sleep 4022")
}

func TestDestroyLeavesNothing(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, local.Options{Config: local.Config{Volumes: []local.Volume{{Name: "vol", MountPath: "/data"}}}})
	stateDir := sb.StateDir()
	mustRun(t, sb, "echo kept > /data/v.txt; "+tree("33")+" &")
	pid := local.InitPID(sb)
	ns := pidNS(pid)
	waitRunning(ns, "sleep 4033", 4)
	mntNS, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	dir := local.Dir(sb)
	cgroups := local.CgroupDirs(sb)
	if os.Geteuid() == 0 && len(cgroups) == 0 {
		t.Error("running as root but the sandbox has no cgroup")
	}
	if len(procsInNS(ns)) < 3 {
		t.Fatalf("sandbox processes before destroy: %v", procsInNS(ns))
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if sb.Status() != sandbox.StatusDestroyed {
		t.Errorf("status %s", sb.Status())
	}
	if p := procsInNS(ns); len(p) != 0 {
		t.Errorf("processes left: %v", p)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", d, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state folder %s left: %v", dir, err)
	}
	// The sandbox's mounts lived in its own mount namespace: no process may
	// still be in it.
	links, _ := filepath.Glob("/proc/[0-9]*/ns/mnt")
	for _, l := range links {
		if target, _ := os.Readlink(l); target == mntNS {
			t.Errorf("%s is still in the sandbox's mount namespace %s", l, mntNS)
		}
	}
	if b, err := os.ReadFile(stateDir + "/volumes/vol/v.txt"); err != nil || string(b) != "kept\n" {
		t.Errorf("volume content after destroy: %q %v (volumes outlive sandboxes)", b, err)
	}
	if _, err := sb.Start(ctx); err == nil {
		t.Error("a destroyed sandbox started again")
	}
	if _, err := localtest.Lookup(ctx, stateDir, sb.ID()); !errorsIs(err, sandbox.ErrNotFound) {
		t.Errorf("Lookup after destroy: %v", err)
	}
}
