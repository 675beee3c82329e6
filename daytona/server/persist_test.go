package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// closeServer closes the server of h as agentbox serve does when it ends.
func closeServer(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// restarted returns sb as a restarted server should answer it: the same,
// but at the new server's URL.
func restarted(sb apiSandbox, h *harness) apiSandbox {
	sb.ToolboxProxyURL = h.url + "/toolbox"
	return sb
}

func TestRecordsSurviveARestart(t *testing.T) {
	eng := newFakeEngine(t)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := newHarness(t, eng, harnessOptions{now: clock.Now})
	var vol volumeDTO
	if st := h.call("POST", "/volumes", map[string]string{"name": "kept"}, &vol); st != http.StatusOK {
		t.Fatalf("create volume: %d", st)
	}
	// One started, with an auto-stop timer; one stopped, with an
	// auto-delete timer; one stopped with neither.
	running := h.create(map[string]any{"name": "running", "labels": map[string]string{"team": "infra"}, "env": map[string]string{"A": "1"},
		"autoStopInterval": 5, "public": true, "networkBlockAll": true,
		"volumes": []map[string]string{{"volumeId": "kept", "mountPath": "/data"}}})
	doomed := h.create(map[string]any{"name": "doomed", "autoDeleteInterval": 10, "autoStopInterval": 0})
	idle := h.create(map[string]any{"name": "idle", "autoStopInterval": 0})
	for _, sb := range []apiSandbox{running, doomed, idle} {
		h.waitState(sb.ID, stateStarted)
	}
	for _, sb := range []apiSandbox{doomed, idle} {
		h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
		h.waitState(sb.ID, stateStopped)
	}
	if st := h.call("PUT", "/sandbox/running/labels", sandboxLabels{Labels: map[string]string{"team": "infra", "tier": "gold"}}, nil); st != http.StatusOK {
		t.Fatalf("labels: %d", st)
	}
	before := map[string]apiSandbox{}
	for _, sb := range []apiSandbox{running, doomed, idle} {
		before[sb.ID], _ = h.get(sb.ID)
	}
	closeServer(t, h)

	// A new server on the same records knows them all, as they were,
	// and the sandboxes kept running meanwhile.
	h2 := newHarness(t, eng, harnessOptions{now: clock.Now, stateDir: h.stateDir})
	for id, want := range before {
		got, st := h2.get(id)
		if st != http.StatusOK {
			t.Fatalf("sandbox %s after a restart: %d", want.Name, st)
		}
		if want = restarted(want, h2); !jsonEqual(t, got, want) {
			t.Errorf("sandbox %s after a restart:\n got %+v\nwant %+v", want.Name, got, want)
		}
	}
	if got, st := h2.get("running"); st != http.StatusOK || got.ID != running.ID {
		t.Fatalf("by name after a restart: %d %+v", st, got)
	}
	var vols []volumeDTO
	if h2.call("GET", "/volumes", nil, &vols); len(vols) != 1 || vols[0].ID != vol.ID {
		t.Fatalf("volumes after a restart: %+v", vols)
	}
	if st := h2.call("DELETE", "/volumes/"+vol.ID, nil, nil); st != http.StatusConflict {
		t.Fatalf("deleting a volume a restored sandbox uses: %d, want 409", st)
	}
	// The timers resume from their bases: the started sandbox stops
	// after its 5 idle minutes, the stopped one goes after its 10.
	clock.advance(6 * time.Minute)
	h2.waitState(running.ID, stateStopped)
	if got, _ := h2.get(doomed.ID); got.State != stateStopped {
		t.Fatalf("auto-delete before its interval: %q", got.State)
	}
	clock.advance(5 * time.Minute)
	h2.waitState(doomed.ID, "gone")
	if got, _ := h2.get(idle.ID); got.State != stateStopped {
		t.Fatalf("the sandbox without timers: %q", got.State)
	}
	// And a third server does not see the deleted one again.
	closeServer(t, h2)
	h3 := newHarness(t, eng, harnessOptions{now: clock.Now, stateDir: h.stateDir})
	if _, st := h3.get(doomed.ID); st != http.StatusNotFound {
		t.Fatalf("the auto-deleted sandbox after another restart: %d", st)
	}
	hist, err := h3.s.store.history(running.ID)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range hist {
		states = append(states, e.State)
	}
	if want := []string{stateCreating, stateStarted, stateStopping, stateStopped}; !slices.Equal(states, want) {
		t.Fatalf("state history %q, want %q", states, want)
	}
}

func TestRestartResumesOperations(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	stopping := h.create(map[string]any{"name": "stopping"})
	starting := h.create(map[string]any{"name": "starting"})
	destroying := h.create(map[string]any{"name": "destroying"})
	for _, sb := range []apiSandbox{stopping, starting, destroying} {
		h.waitState(sb.ID, stateStarted)
	}
	h.call("POST", "/sandbox/starting/stop", nil, nil)
	h.waitState(starting.ID, stateStopped)
	// Every operation is held when the server ends: Close gives up on
	// them, and the records keep the changes in flight.
	for _, op := range []string{"stop", "start", "remove"} {
		eng.block(op)
	}
	h.call("POST", "/sandbox/stopping/stop", nil, nil)
	h.call("POST", "/sandbox/starting/start", nil, nil)
	h.call("DELETE", "/sandbox/destroying", nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.s.Close(ctx); err == nil {
		t.Fatal("Close with a done context waited for the held operations")
	}
	for _, op := range []string{"stop", "start", "remove"} {
		eng.block(op)() // released: the next server's run
	}
	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	h2.waitState(stopping.ID, stateStopped)
	h2.waitState(starting.ID, stateStarted)
	h2.waitState(destroying.ID, "gone")
	if _, err := eng.status(context.Background(), destroying.ID); !errNotFound(err) {
		t.Fatalf("the resumed delete left the sandbox: %v", err)
	}
}

func TestOneServerPerStateDir(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	_, err := newServer(Options{StateDir: h.stateDir}, eng, time.Second, time.Now)
	if !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("a second server on the state dir: %v, want ErrStoreInUse", err)
	}
	// The first one is unharmed.
	sb := h.create(map[string]any{})
	h.waitState(sb.ID, stateStarted)
}

// jsonEqual reports whether a and b encode the same.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// TestRestartDuringBuild: a sandbox whose build a server's end cut short
// is build_failed in the next server, saying why, with its buildInfo kept.
func TestRestartDuringBuild(t *testing.T) {
	eng := newImageFake(t, "team/tools:1")
	h := newHarness(t, eng, harnessOptions{})
	release := eng.hold()
	dockerfile := "FROM team/tools:1\nRUN echo built\n"
	sb := h.create(map[string]any{"name": "cut", "buildInfo": map[string]any{"dockerfileContent": dockerfile}})
	h.waitState(sb.ID, stateBuildingSnapshot)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.s.Close(ctx) // gives up on the build held
	release()
	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	got := h2.waitState(sb.ID, stateBuildFail)
	if !strings.Contains(got.ErrorReason, "ended during the build") || got.BuildInfo == nil || got.BuildInfo.DockerfileContent != dockerfile {
		t.Fatalf("after the restart: errorReason %q, buildInfo %+v", got.ErrorReason, got.BuildInfo)
	}
}

// Snapshots, their states and their build logs are the same after a
// restart; a build the restart cut short ends build_failed, saying why.
func TestSnapshotsSurviveARestart(t *testing.T) {
	eng := newImageFake(t, "tools:1")
	h := newHarness(t, eng, harnessOptions{})
	build := func(name, dockerfile string) {
		t.Helper()
		if st := h.call("POST", "/snapshots", map[string]any{"name": name, "cpu": 2, "buildInfo": map[string]any{"dockerfileContent": dockerfile}}, nil); st != http.StatusOK {
			t.Fatalf("create snapshot %s: %d", name, st)
		}
	}
	build("built:1", "FROM tools:1\nRUN echo built\n")
	h.waitSnapshot("built:1", snapshotActive)
	build("broken:1", "FROM tools:1\nRUN false\n")
	h.waitSnapshot("broken:1", snapshotBuildFailed)
	if st := h.call("POST", "/snapshots/built:1/deactivate", nil, nil); st != http.StatusNoContent {
		t.Fatalf("deactivate: %d", st)
	}
	release := eng.hold()
	defer release()
	build("cut:1", "FROM tools:1\nRUN echo never\n")
	h.waitSnapshot("cut:1", snapshotBuilding)

	type view struct {
		list paginatedSnapshots
		get  map[string]snapshotDTO
		logs map[string]string
	}
	look := func(h *harness) view {
		t.Helper()
		v := view{get: map[string]snapshotDTO{}, logs: map[string]string{}}
		if st := h.call("GET", "/snapshots?sort=name&order=asc", nil, &v.list); st != http.StatusOK {
			t.Fatalf("list snapshots: %d", st)
		}
		for _, d := range v.list.Items {
			var got snapshotDTO
			if st := h.call("GET", "/snapshots/"+d.ID, nil, &got); st != http.StatusOK {
				t.Fatalf("get snapshot %s: %d", d.Name, st)
			}
			v.get[d.Name] = got
			if d.BuildInfo != nil && d.State != snapshotBuilding {
				v.logs[d.Name] = h.buildLogs("/snapshots/"+d.ID+"/build-logs", true)
			}
		}
		return v
	}
	before := look(h)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.s.Close(ctx) // gives up on the build held
	release()

	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	after := look(h2)
	cut := after.get["cut:1"]
	if cut.State != snapshotBuildFailed || cut.ErrorReason == nil || *cut.ErrorReason != errInterruptedSnapshot.Error() {
		t.Errorf("the snapshot whose build the restart cut short: state %q, errorReason %v", cut.State, cut.ErrorReason)
	}
	if log := after.logs["cut:1"]; !strings.Contains(log, "Step 1/2 : FROM tools:1") || !strings.HasSuffix(log, "Build failed: "+errInterruptedSnapshot.Error()+"\n") {
		t.Errorf("the cut build's log after the restart: %q", log)
	}
	// Everything else is as it was.
	for i := range before.list.Items {
		if before.list.Items[i].Name == "cut:1" {
			before.list.Items[i], after.list.Items[i] = snapshotDTO{}, snapshotDTO{}
		}
	}
	delete(after.get, "cut:1")
	delete(after.logs, "cut:1")
	delete(before.get, "cut:1")
	if !jsonEqual(t, after.list, before.list) || !jsonEqual(t, after.get, before.get) {
		t.Errorf("snapshots after a restart:\n got %+v\n%+v\nwant %+v\n%+v", after.list, after.get, before.list, before.get)
	}
	if !jsonEqual(t, after.logs, before.logs) || !strings.Contains(after.logs["broken:1"], "Build failed: ") {
		t.Errorf("build logs after a restart:\n got %q\nwant %q", after.logs, before.logs)
	}
	if got := after.get["built:1"]; got.State != snapshotInactive {
		t.Errorf("the deactivated snapshot after a restart: %q", got.State)
	}
	// The records follow deletes.
	if st := h2.call("DELETE", "/snapshots/"+cut.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete the failed snapshot: %d", st)
	}
	closeServer(t, h2)
	h3 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	if st := h3.call("GET", "/snapshots/cut:1", nil, nil); st != http.StatusNotFound {
		t.Errorf("a deleted snapshot after a restart: %d, want 404", st)
	}
}
