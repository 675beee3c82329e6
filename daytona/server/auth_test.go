package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// newOrgKey creates an API key of org in the records of stateDir.
func newOrgKey(t *testing.T, stateDir, name, org string) string {
	t.Helper()
	k, key, err := CreateAPIKey(context.Background(), stateDir, name, org)
	if err != nil {
		t.Fatal(err)
	}
	if k.OrganizationID != org || k.Name != name || !strings.HasPrefix(key, keyPrefix) {
		t.Fatalf("created key %+v %q", k, key)
	}
	return key
}

func TestOrganizations(t *testing.T) {
	eng := newFakeEngine(t)
	eng.serveOn(8080, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "app") }))
	dir := t.TempDir()
	keyA := newOrgKey(t, dir, "a", "team-a")
	keyB := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, eng, harnessOptions{stateDir: dir})

	// The event stream of team-b's key carries team-b's events only.
	events := dialEvents(t, h)
	events.send(`40{"token":"` + keyB + `"}`)
	if m := events.read(); !strings.HasPrefix(m, "40") {
		t.Fatalf("CONNECT with team-b's key: %q", m)
	}

	// Names are unique within an organization only.
	var a, b apiSandbox
	if st := h.callKey(keyA, "POST", "/sandbox", map[string]any{"name": "same"}, &a); st != http.StatusOK || a.OrganizationID != "team-a" {
		t.Fatalf("create as team-a: %d %+v", st, a)
	}
	if st := h.callKey(keyB, "POST", "/sandbox", map[string]any{"name": "same"}, &b); st != http.StatusOK || b.OrganizationID != "team-b" || b.ID == a.ID {
		t.Fatalf("create as team-b: %d %+v", st, b)
	}
	if _, st := h.get(a.ID); st != http.StatusNotFound {
		t.Fatalf("GET team-a's sandbox with the default organization's key: %d", st)
	}
	for _, sb := range []apiSandbox{a, b} {
		for _, key := range []string{keyA, keyB} {
			var got apiSandbox
			st := h.callKey(key, "GET", "/sandbox/"+sb.ID, nil, &got)
			own := sb.OrganizationID == map[string]string{keyA: "team-a", keyB: "team-b"}[key]
			if own != (st == http.StatusOK) {
				t.Fatalf("GET %s's sandbox with %s's key: %d", sb.OrganizationID, key[:8], st)
			}
		}
	}
	var byName apiSandbox
	if h.callKey(keyB, "GET", "/sandbox/same", nil, &byName); byName.ID != b.ID {
		t.Fatalf("team-b's 'same' is %s, want %s", byName.ID, b.ID)
	}
	// Another organization's sandbox is not found by any route.
	for _, c := range []struct{ method, path string }{
		{"POST", "/sandbox/" + a.ID + "/stop"},
		{"DELETE", "/sandbox/" + a.ID},
		{"PUT", "/sandbox/" + a.ID + "/labels"},
		{"GET", "/sandbox/" + a.ID + "/ports/8080/preview-url"},
		{"GET", "/sandbox/" + a.ID + "/toolbox-proxy-url"},
	} {
		var e apiError
		if st := h.callKey(keyB, c.method, c.path, `{"labels":{}}`, &e); st != http.StatusNotFound || e.StatusCode != http.StatusNotFound {
			t.Fatalf("%s %s with another organization's key: %d %+v, want 404", c.method, c.path, st, e)
		}
	}
	var list listSandboxes
	if h.callKey(keyB, "GET", "/sandbox", nil, &list); len(list.Items) != 1 || list.Items[0].ID != b.ID {
		t.Fatalf("team-b lists %+v", list.Items)
	}
	var paged paginatedSandboxes
	if h.callKey(keyA, "GET", "/sandbox/paginated", nil, &paged); paged.Total != 1 || paged.Items[0].ID != a.ID {
		t.Fatalf("team-a pages %+v", paged)
	}
	h.waitStateKey(keyA, a.ID, stateStarted)
	h.waitStateKey(keyB, b.ID, stateStarted)
	if name, data := events.next(); name != eventCreated || data["id"] != b.ID {
		t.Fatalf("team-b's first event: %s %v, want %s of %s", name, data, eventCreated, b.ID)
	}
	// The toolbox proxy: a key reaches its organization's sandboxes.
	// get answers GET path with key, sent to host (the server's own when
	// empty).
	get := func(host, path, key string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", h.url+path, nil)
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	toolbox := func(key, id string) int { return get("", "/toolbox/"+id+"/version", key) }
	if st := toolbox(keyA, a.ID); st != http.StatusOK {
		t.Fatalf("toolbox of team-a's sandbox with its key: %d", st)
	}
	if st := toolbox(keyB, a.ID); st != http.StatusNotFound {
		t.Fatalf("toolbox of team-a's sandbox with team-b's key: %d, want 404", st)
	}
	if st := toolbox("wrong", a.ID); st != http.StatusUnauthorized {
		t.Fatalf("toolbox with a wrong key: %d, want 401", st)
	}
	// Previews: the same.
	var link portPreviewURL
	h.callKey(keyA, "GET", "/sandbox/"+a.ID+"/ports/8080/preview-url", nil, &link)
	u, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	preview := func(key string) int { return get(u.Host, "/", key) }
	if st := preview(keyA); st != http.StatusOK {
		t.Fatalf("preview with its organization's key: %d", st)
	}
	if st := preview(keyB); st != http.StatusNotFound {
		t.Fatalf("preview with another organization's key: %d, want 404", st)
	}
	// Volumes: one namespace per organization.
	var va, vb volumeDTO
	if st := h.callKey(keyA, "POST", "/volumes", map[string]string{"name": "data"}, &va); st != http.StatusOK || va.OrganizationID != "team-a" {
		t.Fatalf("team-a's volume: %d %+v", st, va)
	}
	if st := h.callKey(keyB, "POST", "/volumes", map[string]string{"name": "data"}, &vb); st != http.StatusOK || vb.ID == va.ID {
		t.Fatalf("team-b's volume of the same name: %d %+v", st, vb)
	}
	var vols []volumeDTO
	if h.callKey(keyB, "GET", "/volumes", nil, &vols); len(vols) != 1 || vols[0].ID != vb.ID {
		t.Fatalf("team-b lists volumes %+v", vols)
	}
	for _, path := range []string{"/volumes/" + va.ID, "/volumes/by-name/nothing"} {
		if st := h.callKey(keyB, "GET", path, nil, nil); st != http.StatusNotFound {
			t.Fatalf("GET %s with team-b's key: %d, want 404", path, st)
		}
	}
	if st := h.callKey(keyB, "DELETE", "/volumes/"+va.ID, nil, nil); st != http.StatusNotFound {
		t.Fatalf("deleting team-a's volume with team-b's key: %d, want 404", st)
	}
	if st := h.callKey(keyA, "POST", "/sandbox", map[string]any{"volumes": []map[string]string{{"volumeId": vb.ID, "mountPath": "/v"}}}, nil); st != http.StatusBadRequest {
		t.Fatalf("mounting another organization's volume: %d, want 400", st)
	}
	for _, c := range []struct {
		key string
		id  string
	}{{keyA, a.ID}, {keyB, b.ID}} {
		h.callKey(c.key, "DELETE", "/sandbox/"+c.id, nil, nil)
	}
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if keys, err := ListAPIKeys(ctx, dir); err != nil || len(keys) != 0 {
		t.Fatalf("keys of new records: %v %v", keys, err)
	}
	k1, key1, err := CreateAPIKey(ctx, dir, "ci", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	k2, key2, err := CreateAPIKey(ctx, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if key1 == key2 || k2.OrganizationID != DefaultOrganizationID || k2.Name == "" || k1.ID == k2.ID {
		t.Fatalf("keys %+v %+v", k1, k2)
	}
	if _, _, err := CreateAPIKey(ctx, dir, "ci", "team-b"); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("a second key named ci: %v", err)
	}
	if _, _, err := CreateAPIKey(ctx, dir, "x", "no/slash"); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("an invalid organization: %v", err)
	}
	keys, err := ListAPIKeys(ctx, dir)
	if err != nil || len(keys) != 2 || keys[0] != k1 || keys[1] != k2 {
		t.Fatalf("keys %+v %v, want %+v %+v", keys, err, k1, k2)
	}
	// Only hashes are stored, in a file of the owner's only.
	for _, f := range []string{storeFile, keysFileName} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), key1) || strings.Contains(string(data), key1[len(keyPrefix):]) {
			t.Fatalf("%s holds a key itself", f)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, keysFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the keys file: %v %v, want mode 0600", fi.Mode(), err)
	}
	if err := RemoveAPIKey(ctx, dir, "ci"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAPIKey(ctx, dir, k1.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("removing a removed key: %v", err)
	}
	// A server accepts the keys left, and no other.
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir})
	if st := h.callKey(key2, "GET", "/sandbox", nil, nil); st != http.StatusOK {
		t.Fatalf("a stored key: %d", st)
	}
	var e apiError
	if st := h.callKey(key1, "GET", "/sandbox", nil, &e); st != http.StatusUnauthorized || e.StatusCode != 401 || e.Error != "Unauthorized" {
		t.Fatalf("a removed key: %d %+v", st, e)
	}
	if !h.s.AuthRequired() {
		t.Fatal("AuthRequired is false with keys")
	}
}

// Keys created and removed while a server runs apply from the next
// request on: a new key is accepted, a removed one refused.
func TestKeysChangeWhileServing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir})
	k, key, err := CreateAPIKey(ctx, dir, "live", "team-live")
	if err != nil {
		t.Fatalf("creating a key while a server runs: %v", err)
	}
	var sb apiSandbox
	if st := h.callKey(key, "POST", "/sandbox", map[string]any{"name": "by-live"}, &sb); st != http.StatusOK || sb.OrganizationID != "team-live" {
		t.Fatalf("a key created while the server runs: %d %+v", st, sb)
	}
	h.waitStateKey(key, sb.ID, stateStarted)
	// Many at once: none is lost.
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			_, keys[i], err = CreateAPIKey(ctx, dir, fmt.Sprintf("many-%d", i), "team-live")
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, key := range keys {
		if st := h.callKey(key, "GET", "/sandbox/by-live", nil, nil); st != http.StatusOK {
			t.Errorf("key many-%d: %d", i, st)
		}
	}
	if all, err := ListAPIKeys(ctx, dir); err != nil || len(all) != 1+len(keys) {
		t.Fatalf("keys listed while the server runs: %d %v", len(all), err)
	}
	if err := RemoveAPIKey(ctx, dir, k.ID); err != nil {
		t.Fatalf("removing a key while the server runs: %v", err)
	}
	var e apiError
	if st := h.callKey(key, "GET", "/sandbox/by-live", nil, &e); st != http.StatusUnauthorized {
		t.Fatalf("a key removed while the server runs: %d %+v, want 401", st, e)
	}
	// The toolbox proxy and the event stream go by the same keys.
	req, _ := http.NewRequest("GET", h.url+"/toolbox/"+sb.ID+"/version", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the toolbox with a removed key: %d, want 401", resp.StatusCode)
	}
	if org, ok := h.s.tokenOrg(key); ok {
		t.Fatalf("the event stream takes a removed key, of %s", org)
	}
	h.callKey(keys[0], "DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitStateKey(keys[0], sb.ID, "gone")
}

// A server that had keys when it started refuses every request once they
// are all removed; one that had none requires one once a key is created.
func TestKeysAllRemovedWhileServing(t *testing.T) {
	spectest.Dir(t) // before the servers start: without the spec files the test skips here
	ctx := context.Background()
	for _, keyedAtStart := range []bool{true, false} {
		dir := t.TempDir()
		var first string
		if keyedAtStart {
			first = newOrgKey(t, dir, "first", DefaultOrganizationID)
		}
		s, err := newServer(Options{StateDir: dir}, newFakeEngine(t), time.Second, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		srv := validatedServer(t, harnessOptions{}, s)
		h := &harness{t: t, s: s, url: srv.URL, client: srv.Client(), stateDir: dir}
		if !keyedAtStart {
			if st := h.callKey("", "GET", "/sandbox", nil, nil); st != http.StatusOK || s.AuthRequired() {
				t.Fatalf("a server without keys: %d, AuthRequired %v", st, s.AuthRequired())
			}
			first = newOrgKey(t, dir, "first", DefaultOrganizationID)
			if st := h.callKey("", "GET", "/sandbox", nil, nil); st != http.StatusUnauthorized || !s.AuthRequired() {
				t.Fatalf("without a key, once one was created: %d, AuthRequired %v", st, s.AuthRequired())
			}
		}
		if st := h.callKey(first, "GET", "/sandbox", nil, nil); st != http.StatusOK {
			t.Fatalf("with the key: %d", st)
		}
		if err := RemoveAPIKey(ctx, dir, "first"); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"", first} {
			st := h.callKey(key, "GET", "/sandbox", nil, nil)
			if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusOK}[keyedAtStart]; st != want {
				t.Fatalf("keyed at start %v, every key removed, with the removed key %v: %d, want %d", keyedAtStart, key != "", st, want)
			}
		}
		srv.Close()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Keys that an earlier version kept in the records move to the keys file.
func TestStoredKeysMove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := keyPrefix + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hash := sha256.Sum256([]byte(key))
	old := storedKey{APIKey: APIKey{ID: "k1", Name: "old", OrganizationID: "team-old", CreatedAt: time.Now().UTC()}, Hash: hex.EncodeToString(hash[:])}
	st, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.put(bucketKeys, old.ID, old); err != nil {
		t.Fatal(err)
	}
	if err := st.put(bucketOrgs, "team-old", storedOrg{ID: "team-old", CreatedAt: old.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
	keys, err := ListAPIKeys(ctx, dir)
	if err != nil || len(keys) != 1 || keys[0] != old.APIKey {
		t.Fatalf("keys of the records of an earlier version: %+v %v", keys, err)
	}
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir})
	var sb apiSandbox
	if st := h.callKey(key, "POST", "/sandbox", map[string]any{}, &sb); st != http.StatusOK || sb.OrganizationID != "team-old" {
		t.Fatalf("the moved key: %d %+v", st, sb)
	}
	h.waitStateKey(key, sb.ID, stateStarted)
	h.callKey(key, "DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitStateKey(key, sb.ID, "gone")
}
