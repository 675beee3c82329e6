package server

import (
	"net/http"
	"strings"
	"testing"
)

// An organization at its quota of sandboxes is refused a create with 403
// naming the quota and how to raise it; another organization still
// creates.
func TestSandboxQuotaPerOrg(t *testing.T) {
	dir := t.TempDir()
	tenant := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir, maxSandboxes: 2})
	for range 2 {
		h.create(map[string]any{})
	}
	var e apiError
	if st := h.call("POST", "/sandbox", map[string]any{}, &e); st != http.StatusForbidden ||
		!strings.Contains(e.Message, "quota") || !strings.Contains(e.Message, "--max-sandboxes-per-org") {
		t.Fatalf("a create past the quota: %d %+v, want 403 naming the quota", st, e)
	}
	var sb apiSandbox
	if st := h.callKey(tenant, "POST", "/sandbox", map[string]any{}, &sb); st != http.StatusOK {
		t.Fatalf("another organization's create: %d, want 200", st)
	}
	var list struct{ Items []apiSandbox }
	h.call("GET", "/sandbox", nil, &list)
	if len(list.Items) != 2 {
		t.Fatalf("the organization at its quota has %d sandboxes, want 2", len(list.Items))
	}
}

// An organization with as many builds waiting or running as it may is
// refused the next (a snapshot's, a sandbox's from buildInfo) with 429
// naming the quota; another organization still builds, and once the
// builds end the organization builds again.
func TestBuildQueuePerOrg(t *testing.T) {
	eng := newImageFake(t, "team/tools:1")
	dir := t.TempDir()
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir, maxQueuedBuilds: 2})
	release := eng.hold()
	defer release()
	for _, name := range []string{"one", "two"} {
		if st := h.call("POST", "/snapshots", map[string]any{"name": name, "imageName": "team/tools:1"}, nil); st != http.StatusOK {
			t.Fatalf("snapshot %s: %d", name, st)
		}
	}
	var e apiError
	if st := h.call("POST", "/snapshots", map[string]any{"name": "three", "imageName": "team/tools:1"}, &e); st != http.StatusTooManyRequests ||
		!strings.Contains(e.Message, "--max-queued-builds-per-org") {
		t.Fatalf("a third build: %d %+v, want 429 naming the quota", st, e)
	}
	if st := h.call("POST", "/sandbox", map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\n"}}, &e); st != http.StatusTooManyRequests {
		t.Fatalf("a sandbox's build past the quota: %d %+v, want 429", st, e)
	}
	if st := h.call("GET", "/snapshots/three", nil, nil); st != http.StatusNotFound {
		t.Errorf("the refused snapshot: %d, want 404 (not recorded)", st)
	}
	if st := h.callKey(keyB, "POST", "/snapshots", map[string]any{"name": "other", "imageName": "team/tools:1"}, nil); st != http.StatusOK {
		t.Fatalf("another organization's build: %d, want 200", st)
	}
	release()
	h.waitSnapshot("one", snapshotActive)
	h.waitSnapshot("two", snapshotActive)
	if st := h.call("POST", "/snapshots", map[string]any{"name": "three", "imageName": "team/tools:1"}, nil); st != http.StatusOK {
		t.Fatalf("a build once the others ended: %d, want 200", st)
	}
	h.waitSnapshot("three", snapshotActive)
	sb := h.create(map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\n"}})
	h.waitState(sb.ID, stateStarted)
	if n := h.s.builds.queued["agentbox"]; n != 0 {
		t.Errorf("builds counted after all ended: %d, want 0", n)
	}
}

// An organization whose images take its quota of the store is refused
// its next build with 403 naming the quota; another organization still
// builds, and deleting a snapshot makes room again.
func TestImageQuotaPerOrg(t *testing.T) {
	eng := newImageFake(t, "team/tools:1") // every image is 1 GB
	dir := t.TempDir()
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir, maxImageBytes: 2.5e9})
	for _, name := range []string{"one", "two", "three"} {
		if st := h.call("POST", "/snapshots", map[string]any{"name": name, "imageName": "team/tools:1"}, nil); st != http.StatusOK {
			t.Fatalf("snapshot %s: %d", name, st)
		}
		h.waitSnapshot(name, snapshotActive)
	}
	var e apiError
	if st := h.call("POST", "/snapshots", map[string]any{"name": "four", "imageName": "team/tools:1"}, &e); st != http.StatusForbidden ||
		!strings.Contains(e.Message, "--max-image-disk-per-org") {
		t.Fatalf("a build past the image quota: %d %+v, want 403 naming the quota", st, e)
	}
	if st := h.call("POST", "/sandbox", map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM team/tools:1\n"}}, &e); st != http.StatusForbidden {
		t.Fatalf("a sandbox's build past the image quota: %d %+v, want 403", st, e)
	}
	if st := h.callKey(keyB, "POST", "/snapshots", map[string]any{"name": "other", "imageName": "team/tools:1"}, nil); st != http.StatusOK {
		t.Fatalf("another organization's build: %d, want 200", st)
	}
	if st := h.call("DELETE", "/snapshots/one", nil, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	if st := h.call("POST", "/snapshots", map[string]any{"name": "four", "imageName": "team/tools:1"}, nil); st != http.StatusOK {
		t.Fatalf("a build after a delete made room: %d, want 200", st)
	}
}
