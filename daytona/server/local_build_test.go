package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// localStoreWith returns a state dir of the local engine (needRoot,
// newLocalStateDir) whose image store, st, has a small image
// (internal/testrootfs) named name.
func localStoreWith(t *testing.T, name string) (dir string, st *image.Store) {
	t.Helper()
	needRoot(t)
	dir = newLocalStateDir(t)
	st, err := local.OpenImageStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	testrootfs.SaveImage(t, st, name)
	return dir, st
}

// With the local engine, a create from buildInfo builds the Dockerfile
// with the local image builder (its RUN steps in sandboxes, their output
// in the build logs) and makes the sandbox of the image; a snapshot made
// from an image name makes sandboxes too, and its delete keeps the image.
func TestLocalBuild(t *testing.T) {
	dir, st := localStoreWith(t, "team/tools:1")
	ctx := context.Background()
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{published: []string{"team/tools:1"}})

	sb := h.create(map[string]any{"name": "built", "buildInfo": map[string]any{
		"dockerfileContent": "FROM team/tools:1\nRUN echo built > /built && echo from-the-run-step\n",
	}})
	if sb.State != statePendingBuild {
		t.Fatalf("create answered %q", sb.State)
	}
	logs := h.buildLogs("/sandbox/built/build-logs", true)
	if !strings.Contains(logs, "FROM team/tools:1") || !strings.Contains(logs, "from-the-run-step\n") {
		t.Fatalf("build logs %q: want the steps and the RUN's output", logs)
	}
	h.waitState(sb.ID, stateStarted)
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: sb.ToolboxProxyURL + "/" + sb.ID, Token: testKey, HTTPClient: h.client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out := exec(t, c, "cat /built /etc/os-release"); out != "built\n"+testrootfs.OSRelease {
		t.Errorf("a sandbox of the built image: %q", out)
	}

	var snap snapshotDTO
	if code := h.call("POST", "/snapshots", map[string]any{"name": "tools-snap", "imageName": "team/tools:1"}, &snap); code != http.StatusOK {
		t.Fatalf("create snapshot: %d", code)
	}
	h.waitSnapshot("tools-snap", snapshotActive)
	other := h.create(map[string]any{"snapshot": "tools-snap"})
	h.waitState(other.ID, stateStarted)
	for _, id := range []string{sb.ID, other.ID} {
		h.call("DELETE", "/sandbox/"+id, nil, nil)
		h.waitState(id, "gone")
	}
	if code := h.call("DELETE", "/snapshots/tools-snap", nil, nil); code != http.StatusOK {
		t.Fatalf("delete snapshot: %d", code)
	}
	if _, err := st.Get(ctx, orgImageName(DefaultOrganizationID, "tools-snap")); err == nil {
		t.Error("the snapshot's name is still in the store")
	}
	if _, err := st.Get(ctx, "team/tools:1"); err != nil {
		t.Errorf("the image the snapshot was made of: %v", err)
	}
}

// With the local engine, resize changes the cpu and memory of a stopped
// sandbox, enforced from its next start, and refuses (501) what the
// engine cannot change: a running sandbox's sizes, the disk.
func TestLocalResize(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{})
	sb := h.create(map[string]any{"name": "resized", "cpu": 1, "memory": 1})
	h.waitState(sb.ID, stateStarted)
	var e apiError
	if code := h.call("POST", "/sandbox/resized/resize", map[string]any{"cpu": 2}, &e); code != http.StatusNotImplemented {
		t.Fatalf("resize a started sandbox: %d %+v, want 501", code, e)
	}
	h.call("POST", "/sandbox/resized/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	if code := h.call("POST", "/sandbox/resized/resize", map[string]any{"disk": 1 << 10}, &e); code != http.StatusNotImplemented {
		t.Fatalf("grow the disk: %d %+v, want 501", code, e)
	}
	var got apiSandbox
	if code := h.call("POST", "/sandbox/resized/resize", map[string]any{"cpu": 2, "memory": 2}, &got); code != http.StatusOK {
		t.Fatalf("resize a stopped sandbox: %d", code)
	}
	if got.State != stateStopped || got.CPU != 2 || got.Memory != 2 {
		t.Fatalf("resize answered state %q cpu %v memory %v", got.State, got.CPU, got.Memory)
	}
	h.call("POST", "/sandbox/resized/start", nil, nil)
	h.waitState(sb.ID, stateStarted)
	info, err := localtest.Lookup(context.Background(), dir, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Limits; l == nil || l.CPUCores != 2 || l.MemoryMB != 2048 {
		t.Fatalf("limits after the resize: %+v, want 2 cores and 2048 MiB", l)
	}
	h.call("DELETE", "/sandbox/resized", nil, nil)
	h.waitState(sb.ID, "gone")
}

// A RUN step that prints hundreds of megabytes (RUN yes | head -c N)
// keeps serve's memory bounded: the build log keeps its last MiB and
// the step's result none of the output. The baseline is the same build
// printing one byte, in the same run.
func TestLocalBuildOutputBounded(t *testing.T) {
	dir, _ := localStoreWith(t, "team/tools:1")
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{published: []string{"team/tools:1"}})
	// The race detector makes the sandbox's toolbox (this binary) stream
	// about 1 MB/s: a smaller output there, with a bound to match.
	printed, bound := int64(300<<20), int64(32<<20)
	if raceEnabled {
		printed, bound = 40<<20, 20<<20
	}
	quiet := buildPeakHeap(t, h, "quiet", 1)
	loud := buildPeakHeap(t, h, "loud", printed)
	t.Logf("serve's heap grew by %.1f MiB while a build printed %d MiB, by %.1f MiB while it printed 1 byte", float64(loud)/(1<<20), printed>>20, float64(quiet)/(1<<20))
	if loud-quiet > bound {
		t.Errorf("serve's heap grew by %d MiB more while a build printed %d MiB than while it printed 1 byte, want it bounded (< %d MiB)", (loud-quiet)>>20, printed>>20, bound>>20)
	}
	logs := h.buildLogs("/snapshots/loud/build-logs", false)
	if len(logs) > maxBuildLog+4096 || !strings.Contains(logs, "y\ny\n") {
		t.Errorf("the build log: %d bytes, want at most its last MiB of the output", len(logs))
	}
	for _, name := range []string{"quiet", "loud"} {
		if code := h.call("DELETE", "/snapshots/"+name, nil, nil); code != http.StatusOK {
			t.Fatalf("delete snapshot %s: %d", name, code)
		}
	}
}

// buildPeakHeap builds snapshot name, whose RUN step prints n bytes, and
// returns by how much the heap in use grew at its peak.
func buildPeakHeap(t *testing.T, h *harness, name string, n int64) int64 {
	t.Helper()
	base := heapInUse()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := heapInUse(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	if code := h.call("POST", "/snapshots", map[string]any{"name": name, "buildInfo": map[string]any{
		"dockerfileContent": fmt.Sprintf("FROM team/tools:1\nRUN yes | head -c %d\n", n),
	}}, nil); code != http.StatusOK {
		t.Fatalf("create snapshot %s: %d", name, code)
	}
	deadline := time.Now().Add(5 * time.Minute)
	var snap snapshotDTO
	for {
		h.call("GET", "/snapshots/"+name, nil, &snap)
		if snap.State == snapshotActive || snap.State == snapshotBuildFailed || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-sampled
	if snap.State != snapshotActive {
		t.Fatalf("the build of %s: %+v", name, snap)
	}
	return int64(peak.Load()) - int64(base)
}

// heapInUse returns the bytes of the heap in use, after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Organizations do not share the build step cache: a step one ran is run
// again for another (its output in the other's log, no "Using cache"),
// while the same organization's second build uses its cache.
func TestLocalBuildCachePerOrg(t *testing.T) {
	dir, _ := localStoreWith(t, "team/tools:1")
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{published: []string{"team/tools:1"}})
	keyB := newOrgKey(t, h.stateDir, "b", "team-b")
	dockerfile := "FROM team/tools:1\nRUN echo ran-the-step > /step\n"
	build := func(key, name string) string {
		t.Helper()
		if code := h.callKey(key, "POST", "/snapshots", map[string]any{"name": name, "buildInfo": map[string]any{"dockerfileContent": dockerfile}}, nil); code != http.StatusOK {
			t.Fatalf("create snapshot %s: %d", name, code)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var snap snapshotDTO
			h.callKey(key, "GET", "/snapshots/"+name, nil, &snap)
			if snap.State == snapshotActive {
				break
			}
			if snap.State == snapshotBuildFailed || time.Now().After(deadline) {
				t.Fatalf("snapshot %s: %+v", name, snap)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return h.buildLogsKey(key, "/snapshots/"+name+"/build-logs", false)
	}
	if logs := build(testKey, "first"); !strings.Contains(logs, "ran-the-step") {
		t.Fatalf("the first build's log: %q", logs)
	}
	if logs := build(testKey, "again"); !strings.Contains(logs, "Using cache") {
		t.Errorf("the same organization's second build: %q, want the step from its cache", logs)
	}
	if logs := build(keyB, "theirs"); strings.Contains(logs, "Using cache") || !strings.Contains(logs, "ran-the-step") {
		t.Errorf("another organization's build of the same step: %q, want it run again", logs)
	}
	for key, names := range map[string][]string{testKey: {"first", "again"}, keyB: {"theirs"}} {
		for _, n := range names {
			h.callKey(key, "DELETE", "/snapshots/"+n, nil, nil)
		}
	}
}
