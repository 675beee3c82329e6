package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestTenantSandboxSnapshotImageQuota: snapshots of a sandbox are images
// of its organization, so a tenant cannot fill the host's image store by
// snapshotting one sandbox again and again: past the organization's image
// quota the next is 403 naming the flag, and nothing is recorded.
func TestTenantSandboxSnapshotImageQuota(t *testing.T) {
	eng := newImageFake(t) // every image is 1 GB
	h := newHarness(t, eng, harnessOptions{stateDir: t.TempDir(), maxImageBytes: 2.5e9})
	sb := h.started(map[string]any{})
	for _, name := range []string{"one", "two", "three"} {
		if st := h.call("POST", "/sandbox/"+sb.ID+"/snapshot", map[string]any{"name": name}, nil); st != http.StatusOK {
			t.Fatalf("snapshot %s: %d", name, st)
		}
		h.waitSnapshot(name, snapshotActive)
		h.waitState(sb.ID, stateStarted)
	}
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/snapshot", map[string]any{"name": "four"}, &e); st != http.StatusForbidden ||
		!strings.Contains(e.Message, "--max-image-disk-per-org") {
		t.Fatalf("a snapshot of a sandbox past the image quota: %d %+v, want 403 naming the quota", st, e)
	}
	if st := h.call("GET", "/snapshots/four", nil, nil); st != http.StatusNotFound {
		t.Fatalf("the refused snapshot: GET %d, want 404 (nothing recorded)", st)
	}
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("the sandbox after the refused snapshot: %s, want started", got.State)
	}
}
