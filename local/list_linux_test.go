package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// summaryOf is what ListSummaries promises of an Info of List.
func summaryOf(in sandbox.Info) sandbox.Info {
	return sandbox.Info{ID: in.ID, Name: in.Name, Provider: in.Provider, Status: in.Status, CreatedAt: in.CreatedAt, LastUsedAt: in.LastUsedAt, TimeoutAt: in.TimeoutAt}
}

// checkSummaries fails unless ListSummaries of stateDir agrees with List
// and gives want's statuses, by id. A running sandbox's use is stamped a
// moment after it happens, so the summary is read between two Lists: its
// LastUsedAt (and TimeoutAt, which follows it) must lie between theirs.
func checkSummaries(t *testing.T, stateDir string, want map[string]sandbox.Status) {
	t.Helper()
	ctx := context.Background()
	list := func() []sandbox.Info {
		t.Helper()
		full, err := local.List(ctx, stateDir)
		if err != nil {
			t.Fatal(err)
		}
		return full
	}
	before := list()
	sums, err := local.ListSummaries(ctx, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	after := list()
	if len(sums) != len(before) || len(sums) != len(after) || len(sums) != len(want) {
		t.Fatalf("ListSummaries: %d sandboxes, List %d then %d, want %d", len(sums), len(before), len(after), len(want))
	}
	within := func(x, lo, hi time.Time) bool { return !x.Before(lo) && !x.After(hi) }
	for i := range sums {
		b, a, s := summaryOf(before[i]), summaryOf(after[i]), sums[i]
		if s.ID != b.ID || s.Status != b.Status || s.Name != b.Name || s.Provider != b.Provider || !s.CreatedAt.Equal(b.CreatedAt) ||
			!within(s.LastUsedAt, b.LastUsedAt, a.LastUsedAt) || !within(s.TimeoutAt, b.TimeoutAt, a.TimeoutAt) {
			t.Errorf("ListSummaries[%d] = %+v, List's before %+v and after %+v", i, s, b, a)
		}
		if s.Status != want[s.ID] {
			t.Errorf("sandbox %s: status %s, want %s", s.ID, s.Status, want[s.ID])
		}
	}
}

// TestListSummariesTruthful: ListSummaries tells what List tells of each
// sandbox's status and times: running, stopped, and running by its
// metadata with its init killed (stopped: the metadata is not believed).
func TestListSummariesTruthful(t *testing.T) {
	stateDir := newStateDir(t)
	run := newSandbox(t, local.Options{ID: "run", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	mustRun(t, run, "true")
	stopped := newSandbox(t, local.Options{ID: "stopped", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	killed := newSandbox(t, local.Options{ID: "killed", StateDir: stateDir, Config: local.Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}})
	checkSummaries(t, stateDir, map[string]sandbox.Status{"run": sandbox.StatusRunning, "stopped": sandbox.StatusStopped, "killed": sandbox.StatusRunning})

	pid := local.InitPID(killed)
	if pid == 0 {
		t.Fatal("no init recorded for a running sandbox")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	reapZombie(pid)
	if !poll(5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Fatalf("init %d outlived SIGKILL", pid)
	}
	checkSummaries(t, stateDir, map[string]sandbox.Status{"run": sandbox.StatusRunning, "stopped": sandbox.StatusStopped, "killed": sandbox.StatusStopped})
}

// TestListSummariesOddMetadata: a sandbox folder whose metadata is
// missing or not JSON is treated as List treats it (left out), and one
// whose metadata is larger than a summary reads is still listed.
func TestListSummariesOddMetadata(t *testing.T) {
	stateDir := newStateDir(t)
	newSandbox(t, local.Options{ID: "big", StateDir: stateDir, Config: local.Config{
		Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}, Labels: map[string]string{"pad": strings.Repeat("x", 20<<10)},
	}})

	for _, id := range []string{"nometa", "badmeta"} {
		if err := os.MkdirAll(filepath.Join(stateDir, "sandboxes", id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Before newStateDir's cleanup, which removes sandboxes by their
	// metadata.
	t.Cleanup(func() { os.RemoveAll(filepath.Join(stateDir, "sandboxes", "badmeta")) })
	if err := os.WriteFile(filepath.Join(stateDir, "sandboxes", "badmeta", "meta.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkSummaries(t, stateDir, map[string]sandbox.Status{"big": sandbox.StatusRunning})
}
