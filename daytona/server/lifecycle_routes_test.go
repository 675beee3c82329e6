package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// Tests of issue 27's routes: fork, pause, auto-pause, last activity,
// TTL and sandbox snapshots, each exchange checked against the spec.

// proxyClient returns a toolbox client of sandbox id through the proxy.
func (h *harness) proxyClient(id string) *toolbox.Client {
	h.t.Helper()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: h.url + "/toolbox/" + id, Token: testKey, HTTPClient: h.client})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// run runs command in sandbox id through the proxy and returns its output.
func (h *harness) run(id, command string) string {
	h.t.Helper()
	res, err := h.proxyClient(id).Execute(context.Background(), toolbox.ExecuteRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		h.t.Fatalf("%s in %s: %+v %v", command, id, res, err)
	}
	return strings.TrimSpace(res.Result)
}

// clockedHarness returns a harness over a fake engine whose clock the
// test moves.
func clockedHarness(t *testing.T) (*harness, *fakeClock) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return newHarness(t, newFakeEngine(t), harnessOptions{now: clock.Now}), clock
}

// started creates a sandbox with body and waits until it is started.
func (h *harness) started(body map[string]any) apiSandbox {
	h.t.Helper()
	sb := h.create(body)
	return h.waitState(sb.ID, stateStarted)
}

func TestForkCopiesFilesAndDiverges(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	src := h.started(map[string]any{"name": "src", "labels": map[string]string{"a": "b"}, "env": map[string]string{"K": "v"}})
	h.run(src.ID, "echo one > f")
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/src/fork", map[string]any{"name": "child"}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d", st)
	}
	if fork.ID == src.ID || fork.Name != "child" || fork.Labels["a"] != "b" || fork.Env["K"] != "v" || fork.OrganizationID != src.OrganizationID {
		t.Fatalf("fork answered %+v", fork)
	}
	h.waitState(fork.ID, stateStarted)
	if got := h.run(fork.ID, "cat f"); got != "one" {
		t.Fatalf("fork's file: %q, want one", got)
	}
	h.run(fork.ID, "echo two > f")
	if got := h.run(src.ID, "cat f"); got != "one" {
		t.Fatalf("source's file after the fork wrote: %q, want one", got)
	}
	if got, _ := h.get(src.ID); got.State != stateStarted {
		t.Fatalf("source after fork: %q", got.State)
	}
}

func TestForkOfStoppedIsStopped(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	src := h.started(map[string]any{})
	h.call("POST", "/sandbox/"+src.ID+"/stop", nil, nil)
	h.waitState(src.ID, stateStopped)
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/"+src.ID+"/fork", map[string]any{}, &fork); st != http.StatusOK || fork.DesiredState != stateStopped {
		t.Fatalf("fork of stopped: %d %+v", st, fork)
	}
	if fork.Name != fork.ID {
		t.Fatalf("unnamed fork: name %q id %q", fork.Name, fork.ID)
	}
	h.waitState(fork.ID, stateStopped)
}

func TestForksListed(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	src := h.started(map[string]any{})
	other := h.started(map[string]any{})
	var a, b apiSandbox
	h.call("POST", "/sandbox/"+src.ID+"/fork", map[string]any{"name": "a"}, &a)
	h.waitState(a.ID, stateStarted)
	h.call("POST", "/sandbox/"+src.ID+"/fork", map[string]any{"name": "b"}, &b)
	h.waitState(b.ID, stateStarted)
	var forks []apiSandbox
	if st := h.call("GET", "/sandbox/"+src.ID+"/forks?includeDestroyed=true", nil, &forks); st != http.StatusOK || len(forks) != 2 || forks[0].ID != a.ID || forks[1].ID != b.ID {
		t.Fatalf("forks: %d %+v", st, forks)
	}
	if st := h.call("GET", "/sandbox/"+other.ID+"/forks", nil, &forks); st != http.StatusOK || len(forks) != 0 {
		t.Fatalf("forks of a sandbox never forked: %d %+v", st, forks)
	}
}

func TestForkBadInput(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{badRequests: true})
	src := h.started(map[string]any{"name": "src"})
	h.create(map[string]any{"name": "taken"})
	for _, c := range []struct {
		path string
		body any
		want int
	}{
		{"/sandbox/missing/fork", map[string]any{}, http.StatusNotFound},
		{"/sandbox/src/fork", map[string]any{"name": "taken"}, http.StatusConflict},
		{"/sandbox/src/fork", map[string]any{"name": "a b"}, http.StatusBadRequest},
		{"/sandbox/src/fork", `{"name": 3}`, http.StatusBadRequest},
	} {
		if st := h.call("POST", c.path, c.body, nil); st != c.want {
			t.Errorf("POST %s %v: %d, want %d", c.path, c.body, st, c.want)
		}
	}
	release := eng.block("remove")
	defer release()
	h.call("DELETE", "/sandbox/src", nil, nil)
	var e apiError
	if st := h.call("POST", "/sandbox/src/fork", map[string]any{}, &e); st != http.StatusConflict || !strings.Contains(e.Message, "destroyed") {
		t.Fatalf("fork of a sandbox being destroyed: %d %+v, want 409", st, e)
	}
	if n := eng.called("fork"); n != 0 {
		t.Fatalf("engine fork called %d times, want 0", n)
	}
	var list listSandboxes
	h.call("GET", "/sandbox?limit=100", nil, &list)
	if len(list.Items) != 2 {
		t.Fatalf("sandboxes after bad forks: %d, want 2 (%s and taken)", len(list.Items), src.ID)
	}
}

func TestPauseAndStartResumes(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.started(map[string]any{})
	var got apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, &got); st != http.StatusOK || got.State != statePaused {
		t.Fatalf("pause: %d state %q, want 200 paused", st, got.State)
	}
	if !eng.pausedBox(sb.ID) {
		t.Fatal("the engine's sandbox is not paused")
	}
	if st := h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, &got); st != http.StatusOK || got.State != statePaused {
		t.Fatalf("pause when paused: %d %q", st, got.State)
	}
	h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil)
	h.waitState(sb.ID, stateStarted)
	if eng.pausedBox(sb.ID) {
		t.Fatal("start left the engine's sandbox paused")
	}
}

func TestToolboxRequestResumesPaused(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.started(map[string]any{})
	h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, nil)
	if got := h.run(sb.ID, "echo hi"); got != "hi" {
		t.Fatalf("command on a paused sandbox: %q", got)
	}
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("after a toolbox request: %q, want started", got.State)
	}
}

func TestPauseBadInput(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{badRequests: true})
	sb := h.started(map[string]any{})
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, &e); st != http.StatusConflict || e.Message != msgNotPausable {
		t.Fatalf("pause of stopped: %d %+v", st, e)
	}
	if got, _ := h.get(sb.ID); got.State != stateStopped {
		t.Fatalf("after a refused pause: %q", got.State)
	}
	if st := h.call("POST", "/sandbox/missing/pause", nil, nil); st != http.StatusNotFound {
		t.Fatalf("pause of missing: %d", st)
	}
	for _, iv := range []string{"-1", "1.5", "x"} {
		if st := h.call("POST", "/sandbox/"+sb.ID+"/autopause/"+iv, nil, nil); st != http.StatusBadRequest {
			t.Errorf("autopause %s: %d, want 400", iv, st)
		}
	}
	for _, body := range []map[string]any{
		{"autoPauseInterval": -1},
		{"autoPauseInterval": 5, "autoStopInterval": 5},
		{"autoPauseInterval": 5, "autoDeleteInterval": 0},
		{"ttlMinutes": -1},
	} {
		if st := h.call("POST", "/sandbox", body, nil); st != http.StatusBadRequest {
			t.Errorf("create %v: %d, want 400", body, st)
		}
	}
	if n := eng.called("pause"); n != 0 {
		t.Fatalf("engine pause called %d times, want 0", n)
	}
}

func TestAutoPause(t *testing.T) {
	h, clock := clockedHarness(t)
	sb := h.started(map[string]any{"autoPauseInterval": 2})
	if sb.AutoPauseInterval != 2 || sb.AutoStopInterval != 0 {
		t.Fatalf("intervals: pause %d stop %d, want 2 and 0", sb.AutoPauseInterval, sb.AutoStopInterval)
	}
	clock.advance(time.Minute)
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("paused before its interval: %q", got.State)
	}
	clock.advance(61 * time.Second)
	h.waitState(sb.ID, statePaused)
}

func TestAutoPauseRoute(t *testing.T) {
	h, clock := clockedHarness(t)
	sb := h.started(map[string]any{})
	var got apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/autopause/1", nil, &got); st != http.StatusOK || got.AutoPauseInterval != 1 || got.AutoStopInterval != 0 {
		t.Fatalf("autopause: %d %+v", st, got)
	}
	clock.advance(61 * time.Second)
	h.waitState(sb.ID, statePaused)
}

func TestPausedIdleIsStopped(t *testing.T) {
	h, clock := clockedHarness(t)
	sb := h.started(map[string]any{"autoStopInterval": 5})
	h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, nil)
	clock.advance(4 * time.Minute)
	if got, _ := h.get(sb.ID); got.State != statePaused {
		t.Fatalf("before its auto-stop interval: %q", got.State)
	}
	clock.advance(61 * time.Second)
	h.waitState(sb.ID, stateStopped)
}

func TestLastActivityRestartsTimers(t *testing.T) {
	h, clock := clockedHarness(t)
	sb := h.started(map[string]any{"autoStopInterval": 2})
	clock.advance(90 * time.Second)
	if st := h.call("POST", "/sandbox/"+sb.ID+"/last-activity", map[string]any{"activityType": "toolbox"}, nil); st != http.StatusCreated {
		t.Fatalf("last-activity: %d, want 201", st)
	}
	got, _ := h.get(sb.ID)
	if want := clock.Now().UTC().Format(timeLayout); got.LastActivityAt != want {
		t.Fatalf("lastActivityAt %q, want %q", got.LastActivityAt, want)
	}
	clock.advance(90 * time.Second) // 3 minutes after creation, 1.5 after the activity
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("stopped although active: %q", got.State)
	}
	clock.advance(31 * time.Second)
	h.waitState(sb.ID, stateStopped)
	if st := h.call("POST", "/sandbox/missing/last-activity", nil, nil); st != http.StatusNotFound {
		t.Fatalf("last-activity of missing: %d", st)
	}
}

func TestTTLDeletesWhateverTheState(t *testing.T) {
	h, clock := clockedHarness(t)
	sb := h.started(map[string]any{"ttlMinutes": 10, "autoStopInterval": 0})
	if want := "2026-01-01T00:10:00.000Z"; sb.AutoDestroyAt != want {
		t.Fatalf("autoDestroyAt %q, want %q", sb.AutoDestroyAt, want)
	}
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateStopped)
	clock.advance(9 * time.Minute)
	if _, st := h.get(sb.ID); st != http.StatusOK {
		t.Fatalf("deleted before its TTL: %d", st)
	}
	clock.advance(time.Minute)
	h.waitState(sb.ID, "gone")
}

func TestPausedSurvivesRestart(t *testing.T) {
	eng := newFakeEngine(t)
	dir := t.TempDir()
	h := newHarness(t, eng, harnessOptions{stateDir: dir})
	sb := h.started(map[string]any{"autoPauseInterval": 7, "ttlMinutes": 60})
	h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, eng, harnessOptions{stateDir: dir})
	got, _ := h2.get(sb.ID)
	if got.State != statePaused || got.AutoPauseInterval != 7 || got.AutoDestroyAt == "" || !eng.pausedBox(sb.ID) {
		t.Fatalf("after a restart: %+v (engine paused %v)", got, eng.pausedBox(sb.ID))
	}
	h2.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil)
	h2.waitState(sb.ID, stateStarted)
}

func TestSandboxSnapshotCreatesFrom(t *testing.T) {
	eng := newImageFake(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.started(map[string]any{})
	var got apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/snapshot", map[string]any{"name": "mine"}, &got); st != http.StatusOK || got.State != stateSnapshotting {
		t.Fatalf("snapshot: %d state %q", st, got.State)
	}
	h.waitState(sb.ID, stateStarted)
	snap := h.waitSnapshot("mine", snapshotActive)
	if snap.Name != "mine" {
		t.Fatalf("snapshot %+v", snap)
	}
	from := h.create(map[string]any{"snapshot": "mine"})
	if from = h.waitState(from.ID, stateStarted); from.Snapshot != "mine" {
		t.Fatalf("sandbox from the snapshot: %+v", from)
	}
}

func TestSandboxSnapshotBadInput(t *testing.T) {
	eng := newImageFake(t)
	h := newHarness(t, eng, harnessOptions{badRequests: true})
	sb := h.started(map[string]any{})
	h.call("POST", "/sandbox/"+sb.ID+"/snapshot", map[string]any{"name": "taken"}, nil)
	h.waitSnapshot("taken", snapshotActive)
	h.waitState(sb.ID, stateStarted)
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/snapshot", map[string]any{"name": "mem", "includeMemory": true}, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, "cannot keep memory in a snapshot on this engine") {
		t.Fatalf("includeMemory: %d %+v", st, e)
	}
	for _, c := range []struct {
		path string
		body any
		want int
	}{
		{"/sandbox/" + sb.ID + "/snapshot", map[string]any{"name": "taken"}, http.StatusConflict},
		{"/sandbox/" + sb.ID + "/snapshot", map[string]any{"name": ""}, http.StatusBadRequest},
		{"/sandbox/missing/snapshot", map[string]any{"name": "new"}, http.StatusNotFound},
	} {
		if st := h.call("POST", c.path, c.body, nil); st != c.want {
			t.Errorf("POST %s %v: %d, want %d", c.path, c.body, st, c.want)
		}
	}
	if n := eng.called("snapshot"); n != 1 {
		t.Fatalf("engine snapshot called %d times, want 1", n)
	}
	for _, name := range []string{"mem", "new"} {
		if st := h.call("GET", "/snapshots/"+name, nil, nil); st != http.StatusNotFound {
			t.Errorf("snapshot %s after a refused create: %d, want 404", name, st)
		}
	}
}

// TestStartWhileResuming: a start while a resume is in flight (begun by
// a toolbox request) is answered 200, as a start of a started sandbox.
func TestStartWhileResuming(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.started(map[string]any{})
	h.call("POST", "/sandbox/"+sb.ID+"/pause", nil, nil)
	release := eng.block("resume")
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil); st != http.StatusOK {
		t.Fatalf("first start: %d", st)
	}
	var got apiSandbox
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, &got); st != http.StatusOK || got.State != stateResuming {
		t.Fatalf("start while resuming: %d %q, want 200 resuming", st, got.State)
	}
	release()
	h.waitState(sb.ID, stateStarted)
}

// TestLifecycleRoutesPerOrganization: another organization's key gets
// 404 from every new route of a sandbox, and changes nothing.
func TestLifecycleRoutesPerOrganization(t *testing.T) {
	eng := newImageFake(t)
	dir := t.TempDir()
	other := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir})
	sb := h.started(map[string]any{})
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/fork", map[string]any{}},
		{"GET", "/forks", nil},
		{"POST", "/pause", nil},
		{"POST", "/autopause/5", nil},
		{"POST", "/last-activity", nil},
		{"POST", "/snapshot", map[string]any{"name": "theirs"}},
	} {
		if st := h.callKey(other, c.method, "/sandbox/"+sb.ID+c.path, c.body, nil); st != http.StatusNotFound {
			t.Errorf("%s %s with another organization's key: %d, want 404", c.method, c.path, st)
		}
		if st := h.callKey("", c.method, "/sandbox/"+sb.ID+c.path, c.body, nil); st != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401", c.method, c.path, st)
		}
	}
	got, _ := h.get(sb.ID)
	if got.State != stateStarted || got.AutoPauseInterval != 0 || got.LastActivityAt != sb.LastActivityAt {
		t.Fatalf("after other organizations' calls: %+v", got)
	}
	for _, op := range []string{"fork", "pause", "snapshot"} {
		if n := eng.called(op); n != 0 {
			t.Errorf("engine %s called %d times, want 0", op, n)
		}
	}
}
