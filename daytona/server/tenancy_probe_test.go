package server

import (
	"io"
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

// TestCrossOriginLifecycleRoutes: a web page cannot drive issue 27's
// routes on a keyless serve (fork, pause, intervals, activity, snapshots,
// recover, warm pools): a cross-site request, bodiless or not, is 403
// before the handler runs; the same request from a client (no Origin)
// reaches the handler, which finds no such sandbox or pool (control).
func TestCrossOriginLifecycleRoutes(t *testing.T) {
	eng := newFakeEngine(t)
	srv := keylessServer(t, eng)
	cross := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}
	client := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/sandbox/sbx-none/fork", ""},
		{"POST", "/api/sandbox/sbx-none/pause", ""},
		{"POST", "/api/sandbox/sbx-none/autopause/5", ""},
		{"POST", "/api/sandbox/sbx-none/last-activity", ""},
		{"POST", "/api/sandbox/sbx-none/snapshot", `{"name":"x"}`},
		{"POST", "/api/sandbox/sbx-none/recover", ""},
		{"POST", "/api/warm-pools", `{"snapshot":"x","pool":1}`},
		{"PATCH", "/api/warm-pools/none", `{"pool":2}`},
		{"DELETE", "/api/warm-pools/none", ""},
	} {
		if got := send(t, srv, c.method, c.path, cross, c.body); got != http.StatusForbidden {
			t.Errorf("cross-site %s %s: %d, want 403", c.method, c.path, got)
		}
		if got := send(t, srv, c.method, c.path, client, c.body); got != http.StatusNotFound && got != http.StatusBadRequest && got != http.StatusNotImplemented {
			t.Errorf("control: %s %s from a client: %d, want the handler's 404 (no such sandbox or pool), 400 or 501 (no image store)", c.method, c.path, got)
		}
	}
	for _, op := range []string{"fork", "pause", "create"} {
		if n := eng.called(op); n != 0 {
			t.Errorf("engine %s called %d times by refused requests", op, n)
		}
	}
}

// TestCrossOriginPreviewListener: a preview listener applies the
// cross-origin rule as serve does: a cross-site POST carrying the
// sandbox's preview token never reaches the app (403); the same POST
// from a client does (control).
func TestCrossOriginPreviewListener(t *testing.T) {
	h, _ := listenerHarness(t)
	var link portPreviewURL
	if st := h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link); st != http.StatusOK {
		t.Fatalf("preview-url: %d", st)
	}
	post := func(hdr http.Header) (int, string) {
		req, err := http.NewRequest("POST", link.URL+"/act", strings.NewReader("a=b"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr
		req.Header.Set(previewTokenHeader, link.Token)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := post(http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}); st != http.StatusForbidden || strings.Contains(body, "app ") {
		t.Errorf("a cross-site POST to the listener: %d %q, want 403 without the app", st, body)
	}
	if st, body := post(http.Header{}); st != http.StatusOK || !strings.HasPrefix(body, "app /act") {
		t.Errorf("control: a client's POST: %d %q, want the app's answer", st, body)
	}
}

// TestTenantPreviewListenerOtherOrgKey: another organization's API key
// opens no preview listener of a sandbox not its own (404, the app not
// reached); the sandbox's organization's key does (control).
func TestTenantPreviewListenerOtherOrgKey(t *testing.T) {
	eng := newFakeEngine(t)
	eng.serveOn(8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") }))
	dir := t.TempDir()
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir, listenerPreviews: true})
	sb := h.create(map[string]any{"name": "web"})
	h.waitState(sb.ID, stateStarted)
	var link portPreviewURL
	if st := h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link); st != http.StatusOK {
		t.Fatalf("preview-url: %d", st)
	}
	if st, body := previewGet(t, link.URL+"/", http.Header{"Authorization": {"Bearer " + keyB}}); st != http.StatusNotFound || body == "app" {
		t.Errorf("another organization's key on the listener: %d %q, want 404", st, body)
	}
	if st, body := previewGet(t, link.URL+"/", http.Header{"Authorization": {"Bearer " + testKey}}); st != http.StatusOK || body != "app" {
		t.Errorf("control: the organization's key: %d %q, want the app", st, body)
	}
	if st := h.callKey(keyB, "GET", "/sandbox/"+sb.ID+"/ports/8080/preview-url", nil, nil); st != http.StatusNotFound {
		t.Errorf("another organization's preview-url: %d, want 404", st)
	}
}
