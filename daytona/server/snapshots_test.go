package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// imageFake is the fake engine with an image store in memory: a build
// logs its Dockerfile's lines, waits while its gate is held, fails on a
// line "RUN false", and saves the image under its name.
type imageFake struct {
	*fakeEngine
	mu     sync.Mutex
	names  map[string]bool
	gate   chan struct{} // non-nil: builds wait until it is closed
	builds int
	// initial are the names it was made with.
	initial []string
}

func newImageFake(t *testing.T, names ...string) *imageFake {
	f := &imageFake{fakeEngine: newFakeEngine(t), names: map[string]bool{}, initial: names}
	for _, n := range names {
		f.names[n] = true
	}
	return f
}

// hold makes builds wait until the returned function is called.
func (f *imageFake) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.gate = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (f *imageFake) build(ctx context.Context, job buildJob, logs io.Writer) (imageInfo, error) {
	dockerfile, name := job.dockerfile, job.name
	f.mu.Lock()
	f.builds++
	gate := f.gate
	f.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(dockerfile), "\n")
	for i, l := range lines {
		fmt.Fprintf(logs, "Step %d/%d : %s\n", i+1, len(lines), l)
		if i == 0 && gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return imageInfo{}, ctx.Err()
			}
		}
		if base, ok := strings.CutPrefix(l, "FROM "); ok && !f.has(base) && !f.has(orgImageName(job.org, base)) {
			return imageInfo{}, fmt.Errorf("image %s: not found", base)
		}
		if l == "RUN sleep infinity" {
			<-ctx.Done()
			return imageInfo{}, context.Cause(ctx)
		}
		if l == "RUN false" {
			return imageInfo{}, errors.New("the command false returned a non-zero code: 1")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[name] = true
	return imageInfo{names: []string{name}, size: 2e9, created: time.Now()}, nil
}

func (f *imageFake) has(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names[name]
}

func (f *imageFake) images(context.Context) ([]imageInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []imageInfo
	for n := range f.names {
		out = append(out, imageInfo{names: []string{n}, size: 1e9})
	}
	return out, nil
}

func (f *imageFake) untag(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.names[name] {
		return fmt.Errorf("%s: %w", name, sandbox.ErrNotFound)
	}
	delete(f.names, name)
	return nil
}

func (f *imageFake) hasImage(_ context.Context, ref string) (bool, error) { return f.has(ref), nil }

// waitSnapshot polls snapshot ref until it is in state want.
func (h *harness) waitSnapshot(ref, want string) snapshotDTO {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var d snapshotDTO
		st := h.call("GET", "/snapshots/"+ref, nil, &d)
		if st == http.StatusOK && d.State == want {
			return d
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("snapshot %s: %d state %q, want %q", ref, st, d.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// buildLogs returns the build log at path (under /api), following it
// when follow is set.
func (h *harness) buildLogs(path string, follow bool) string {
	h.t.Helper()
	return h.buildLogsKey(testKey, path, follow)
}

// buildLogsKey is buildLogs with the API key key.
func (h *harness) buildLogsKey(key, path string, follow bool) string {
	h.t.Helper()
	if follow {
		path += "?follow=true"
	}
	req, err := http.NewRequest("GET", h.url+"/api"+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, data, err)
	}
	return string(data)
}

func TestSnapshots(t *testing.T) {
	eng := newImageFake(t, "team/tools:1", "agentbox-build:0123abcd")
	h := newHarness(t, eng, harnessOptions{})

	// The store's images are snapshots (not the intermediate ones of
	// builds), beside the default.
	var list paginatedSnapshots
	h.call("GET", "/snapshots?sort=name&order=asc", nil, &list)
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name+"="+it.State)
	}
	if want := []string{"agentbox-host=active", "team/tools:1=active"}; !slices.Equal(names, want) || list.Total != 2 || list.TotalPages != 1 {
		t.Fatalf("snapshots %v (total %d), want %v", names, list.Total, want)
	}

	// From an image name: pending, pulling, then active; the build logs
	// followed until the end.
	release := eng.hold()
	var snap snapshotDTO
	if st := h.call("POST", "/snapshots", map[string]any{"name": "tools-snap", "imageName": "team/tools:1", "cpu": 2, "memory": 3, "entrypoint": []string{"sleep", "infinity"}}, &snap); st != http.StatusOK {
		t.Fatalf("create snapshot: %d", st)
	}
	if snap.State != snapshotPending || snap.ID != snapshotID(DefaultOrganizationID, "tools-snap") || snap.CPU != 2 {
		t.Fatalf("create answered %+v", snap)
	}
	h.waitSnapshot(snap.ID, snapshotPulling)
	var link toolboxProxyURL
	h.call("GET", "/snapshots/tools-snap/build-logs-url", nil, &link)
	if want := h.url + "/api/snapshots/" + snap.ID + "/build-logs"; link.URL != want {
		t.Fatalf("build-logs-url %q, want %q", link.URL, want)
	}
	logs := make(chan string, 1)
	go func() { logs <- h.buildLogs("/snapshots/"+snap.ID+"/build-logs", true) }()
	if st := h.call("POST", "/snapshots", map[string]any{"name": "tools-snap", "imageName": "team/tools:1"}, nil); st != http.StatusConflict {
		t.Fatalf("a second snapshot of the name: %d, want 409", st)
	}
	if st := h.call("DELETE", "/snapshots/tools-snap", nil, nil); st != http.StatusConflict {
		t.Fatalf("delete while pulling: %d, want 409", st)
	}
	release()
	got := h.waitSnapshot("tools-snap", snapshotActive)
	if want := "Step 1/2 : FROM team/tools:1\nStep 2/2 : ENTRYPOINT [\"sleep\",\"infinity\"]\n"; <-logs != want {
		t.Fatalf("followed build logs differ, want %q", want)
	}
	if got.Size == nil || *got.Size != 1 || got.ImageName != "team/tools:1" || !slices.Equal(got.Entrypoint, []string{"sleep", "infinity"}) {
		t.Fatalf("active snapshot %+v", got)
	}

	// A sandbox of it takes its sizes; an inactive one makes none.
	sb := h.create(map[string]any{"snapshot": snap.ID})
	if sb.Snapshot != "tools-snap" || sb.CPU != 2 || sb.Memory != 3 {
		t.Fatalf("sandbox of the snapshot: snapshot %q cpu %v memory %v", sb.Snapshot, sb.CPU, sb.Memory)
	}
	h.waitState(sb.ID, stateStarted)
	if st := h.call("POST", "/snapshots/tools-snap/deactivate", nil, nil); st != http.StatusNoContent {
		t.Fatalf("deactivate: %d", st)
	}
	var e apiError
	if st := h.call("POST", "/sandbox", map[string]any{"snapshot": "tools-snap"}, &e); st != http.StatusBadRequest || e.Message != "Snapshot tools-snap is inactive" {
		t.Fatalf("create from an inactive snapshot: %d %+v", st, e)
	}
	if st := h.call("POST", "/snapshots/tools-snap/activate", nil, &got); st != http.StatusOK || got.State != snapshotActive {
		t.Fatalf("activate: %d %+v", st, got)
	}
	if st := h.call("POST", "/snapshots/tools-snap/activate", nil, &e); st != http.StatusBadRequest {
		t.Fatalf("activate an active snapshot: %d, want 400", st)
	}

	// A Dockerfile whose RUN fails: build_failed, and why.
	h.call("POST", "/snapshots", map[string]any{"name": "broken", "buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\nRUN false\n"}}, nil)
	failed := h.waitSnapshot("broken", snapshotBuildFailed)
	if failed.ErrorReason == nil || !strings.Contains(*failed.ErrorReason, "non-zero code") || failed.BuildInfo == nil || failed.BuildInfo.SnapshotRef != "broken" {
		t.Fatalf("failed snapshot %+v", failed)
	}
	if out := h.buildLogs("/snapshots/broken/build-logs", false); !strings.Contains(out, "Step 2/2 : RUN false\nBuild failed: ") {
		t.Fatalf("logs of the failed build: %q", out)
	}
	if st := h.call("POST", "/sandbox", map[string]any{"snapshot": "broken"}, &e); st != http.StatusBadRequest || e.Message != "Snapshot broken is build_failed" {
		t.Fatalf("create from a failed snapshot: %d %+v", st, e)
	}

	for _, bad := range []map[string]any{
		{"name": "x:latest", "imageName": "team/tools:1"},
		{"name": "x", "imageName": "team/tools:latest"},
		{"name": "x"},
		{"name": "x", "imageName": "a:1", "buildInfo": map[string]any{"dockerfileContent": "FROM a:1"}},
		{"name": "agentbox-host", "imageName": "team/tools:1"},
	} {
		if st := h.call("POST", "/snapshots", bad, &e); st != http.StatusBadRequest {
			t.Errorf("create snapshot %v: %d %+v, want 400", bad, st, e)
		}
	}
	if st := h.call("POST", "/snapshots", map[string]any{"name": "ctx", "buildInfo": map[string]any{"dockerfileContent": "FROM a:1", "contextHashes": []string{"h"}}}, &e); st != http.StatusNotImplemented {
		t.Errorf("a build context: %d %+v, want 501", st, e)
	}
	// The SDKs ask for object storage before uploading a context: 501,
	// saying what to do instead.
	if st := h.call("GET", "/object-storage/push-access", nil, &e); st != http.StatusNotImplemented || !strings.Contains(e.Message, "agentbox image build") {
		t.Errorf("push access to object storage: %d %+v, want 501", st, e)
	}

	// Delete takes the snapshot's name off the store, keeping the image
	// it was made of.
	for _, ref := range []string{"tools-snap", "broken"} {
		if st := h.call("DELETE", "/snapshots/"+ref, nil, nil); st != http.StatusOK {
			t.Fatalf("delete %s: %d", ref, st)
		}
		if st := h.call("GET", "/snapshots/"+ref, nil, nil); st != http.StatusNotFound {
			t.Fatalf("get %s after delete: %d, want 404", ref, st)
		}
	}
	if eng.has(orgImageName(DefaultOrganizationID, "tools-snap")) || !eng.has("team/tools:1") {
		t.Fatal("delete did not untag the snapshot's name alone")
	}
	if st := h.call("DELETE", "/snapshots/agentbox-host", nil, nil); st != http.StatusBadRequest {
		t.Fatalf("delete the default snapshot: %d, want 400", st)
	}
	h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitState(sb.ID, "gone")
}

// A create from buildInfo goes through Daytona's build states; its build
// logs stream until the build ends; a build that fails leaves the
// sandbox build_failed.
func TestCreateFromBuildInfo(t *testing.T) {
	eng := newImageFake(t, "team/tools:1")
	h := newHarness(t, eng, harnessOptions{})
	release := eng.hold()
	dockerfile := "FROM team/tools:1\nRUN echo built\n"
	sb := h.create(map[string]any{"name": "built", "buildInfo": map[string]any{"dockerfileContent": dockerfile}, "cpu": 2})
	if sb.State != statePendingBuild || sb.DesiredState != stateStarted || sb.BuildInfo == nil || sb.BuildInfo.DockerfileContent != dockerfile {
		t.Fatalf("create answered state %q desired %q buildInfo %+v", sb.State, sb.DesiredState, sb.BuildInfo)
	}
	ref := sb.BuildInfo.SnapshotRef
	if !strings.HasPrefix(ref, sandboxBuildPrefix) || sb.Snapshot != ref {
		t.Fatalf("snapshotRef %q, snapshot %q", ref, sb.Snapshot)
	}
	h.waitState(sb.ID, stateBuildingSnapshot)
	var link toolboxProxyURL
	h.call("GET", "/sandbox/built/build-logs-url", nil, &link)
	logs := make(chan string, 1)
	go func() { logs <- h.buildLogs(strings.TrimPrefix(link.URL, h.url+"/api"), true) }()
	if st := h.call("POST", "/sandbox/built/stop", nil, nil); st != http.StatusConflict {
		t.Fatalf("stop while building: %d, want 409", st)
	}
	release()
	got := h.waitState(sb.ID, stateStarted)
	if want := "Step 1/2 : FROM team/tools:1\nStep 2/2 : RUN echo built\n"; <-logs != want {
		t.Fatalf("followed build logs differ, want %q", want)
	}
	if got.CPU != 2 || got.BuildInfo == nil || got.BuildInfo.SnapshotRef != ref {
		t.Fatalf("started sandbox %+v", got)
	}
	// The built image is no snapshot of the list.
	var list paginatedSnapshots
	h.call("GET", "/snapshots", nil, &list)
	if list.Total != 2 {
		t.Fatalf("snapshots after a build: %+v, want the default and team/tools:1", list.Items)
	}

	bad := h.create(map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\nRUN false\n"}})
	failed := h.waitState(bad.ID, stateBuildFail)
	if !strings.Contains(failed.ErrorReason, "non-zero code") {
		t.Fatalf("errorReason %q", failed.ErrorReason)
	}
	var e apiError
	if st := h.call("POST", "/sandbox/"+bad.ID+"/start", nil, &e); st != http.StatusBadRequest || e.Message != msgErrored {
		t.Fatalf("start a build_failed sandbox: %d %+v", st, e)
	}
	if st := h.call("GET", "/sandbox/"+bad.ID+"/build-logs", nil, nil); st != http.StatusOK {
		t.Fatalf("logs of a failed build: %d", st)
	}
	if st := h.call("GET", "/sandbox/built/build-logs", nil, nil); st != http.StatusOK {
		t.Fatalf("logs after the build: %d", st)
	}
	for _, body := range []map[string]any{
		{"snapshot": "team/tools:1", "buildInfo": map[string]any{"dockerfileContent": dockerfile}},
		{"buildInfo": map[string]any{"dockerfileContent": " "}},
	} {
		if st := h.call("POST", "/sandbox", body, &e); st != http.StatusBadRequest {
			t.Errorf("create %v: %d %+v, want 400", body, st, e)
		}
	}
	if st := h.call("POST", "/sandbox", map[string]any{"buildInfo": map[string]any{"dockerfileContent": dockerfile, "contextHashes": []string{"h"}}}, &e); st != http.StatusNotImplemented {
		t.Errorf("a build context: %d %+v, want 501", st, e)
	}
	for _, id := range []string{sb.ID, bad.ID} {
		h.call("DELETE", "/sandbox/"+id, nil, nil)
		h.waitState(id, "gone")
	}
	// A sandbox from a snapshot has no build logs.
	plain := h.create(map[string]any{})
	if st := h.call("GET", "/sandbox/"+plain.ID+"/build-logs-url", nil, &e); st != http.StatusNotFound {
		t.Errorf("build-logs-url of a sandbox without a build: %d, want 404", st)
	}
	h.waitState(plain.ID, stateStarted)
	h.call("DELETE", "/sandbox/"+plain.ID, nil, nil)
	h.waitState(plain.ID, "gone")
}

// Resize checks Daytona's rules, and the engine that cannot resize says
// so.
func TestResize(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"cpu": 2, "memory": 4, "disk": 8})
	h.waitState(sb.ID, stateStarted)
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{}, http.StatusBadRequest, "give at least one"},
		{map[string]any{"disk": 4}, http.StatusBadRequest, "Disk size cannot be decreased"},
		{map[string]any{"disk": 16}, http.StatusBadRequest, "only be resized while the sandbox is stopped"},
		{map[string]any{"cpu": 1}, http.StatusBadRequest, "only be decreased while the sandbox is stopped"},
		{map[string]any{"cpu": 4}, http.StatusNotImplemented, "cannot resize"},
	} {
		var e apiError
		if st := h.call("POST", "/sandbox/"+sb.ID+"/resize", c.body, &e); st != c.status || !strings.Contains(e.Message, c.msg) {
			t.Errorf("resize %v: %d %q, want %d %q", c.body, st, e.Message, c.status, c.msg)
		}
	}
	h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitState(sb.ID, "gone")
}

// The event stream carries snapshots' events, as Daytona's: created, each
// change of state, removed.
func TestSnapshotEvents(t *testing.T) {
	eng := newImageFake(t, "tools:1")
	h := newHarness(t, eng, harnessOptions{})
	c := dialEvents(t, h)
	c.send(`40{"token":"` + testKey + `"}`)
	if m := c.read(); !strings.HasPrefix(m, `40{"sid":`) {
		t.Fatalf("CONNECT: %q", m)
	}
	var created snapshotDTO
	if st := h.call("POST", "/snapshots", map[string]any{"name": "ev:1", "imageName": "tools:1"}, &created); st != http.StatusOK {
		t.Fatalf("create snapshot: %d", st)
	}
	name, data := c.next()
	if name != eventSnapshotCreated || data["id"] != created.ID || data["name"] != "ev:1" {
		t.Fatalf("first event: %s %v, want %s of ev:1", name, data, eventSnapshotCreated)
	}
	state := func(old, new string) {
		t.Helper()
		name, data := c.next()
		snap, _ := data["snapshot"].(map[string]any)
		if name != eventSnapshotState || data["oldState"] != old || data["newState"] != new || snap["id"] != created.ID || snap["state"] != new {
			t.Fatalf("event %s %v, want %s from %s to %s", name, data, eventSnapshotState, old, new)
		}
	}
	state(snapshotPending, snapshotPulling)
	state(snapshotPulling, snapshotActive)
	if st := h.call("POST", "/snapshots/"+created.ID+"/deactivate", nil, nil); st != http.StatusNoContent {
		t.Fatalf("deactivate: %d", st)
	}
	state(snapshotActive, snapshotInactive)
	if st := h.call("POST", "/snapshots/"+created.ID+"/activate", nil, nil); st != http.StatusOK {
		t.Fatalf("activate: %d", st)
	}
	state(snapshotInactive, snapshotActive)
	if st := h.call("DELETE", "/snapshots/"+created.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	if m, want := c.read(), `42["`+eventSnapshotRemoved+`","`+created.ID+`"]`; m != want {
		t.Fatalf("after the delete: %q, want %q", m, want)
	}
}
