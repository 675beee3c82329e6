package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// setSecrets records the secrets of sandbox id (secrets, calls
// "setSecrets").
func (e *fakeEngine) setSecrets(ctx context.Context, id string, secrets []sandbox.Secret) error {
	return e.op(ctx, "setSecrets", id, func(*fakeBox) error {
		if e.secrets == nil {
			e.secrets = map[string][]sandbox.Secret{}
		}
		e.secrets[id] = slices.Clone(secrets)
		return nil
	})
}

// secretsOf returns the secrets sandbox id has in the engine: those
// setSecrets gave last, else those it was created with; ok is false when
// the engine never had any of it.
func (e *fakeEngine) secretsOf(id string) (got []sandbox.Secret, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.secrets[id]; ok {
		return s, true
	}
	if b := e.boxes[id]; b != nil && b.spec.secrets != nil {
		return b.spec.secrets, true
	}
	return nil, false
}

// The secret values of the tests: none appears in any answer or log.
const (
	testSecretValue = "sk-test-VALUE-7f3a9c1e5b"
	newSecretValue  = "sk-test-ROTATED-22d81e04"
)

// syncLog is a server's log, safe for concurrent writes.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format+"\n", args...)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// raw sends method path (under /api) with the JSON body and returns the
// status and the answer's body.
func (h *harness) raw(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var out rawBody
	st := h.call(method, path, body, &out)
	return st, out
}

// rawBody keeps an answer's JSON as it came.
type rawBody []byte

func (b *rawBody) UnmarshalJSON(data []byte) error { *b = append((*b)[:0], data...); return nil }

// createTestSecret creates secret name with testSecretValue for
// api.example.com and returns it.
func (h *harness) createTestSecret(name string) secretDTO {
	h.t.Helper()
	var d secretDTO
	if st := h.call("POST", "/secret", map[string]any{"name": name, "value": testSecretValue, "hosts": []string{"API.example.com."}}, &d); st != http.StatusCreated {
		h.t.Fatalf("create secret %s: %d", name, st)
	}
	return d
}

func TestSecretCreate(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	var d secretDTO
	st := h.call("POST", "/secret", map[string]any{"name": "OPENAI-key", "value": testSecretValue, "description": "for the agent", "hosts": []string{"API.openai.com.", "*.example.com"}}, &d)
	if st != http.StatusCreated {
		t.Fatalf("status %d", st)
	}
	if d.ID == "" || d.Name != "OPENAI-key" || d.Description != "for the agent" || d.Placeholder != placeholderMarker ||
		!slices.Equal(d.Hosts, []string{"api.openai.com", "*.example.com"}) || d.CreatedAt == "" || d.UpdatedAt == "" {
		t.Fatalf("created %+v", d)
	}
}

func TestSecretDuplicateNameIsConflict(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	h.createTestSecret("DUP")
	var e apiError
	if st := h.call("POST", "/secret", map[string]any{"name": "DUP", "value": "other", "hosts": []string{"x.example.com"}}, &e); st != http.StatusConflict || !strings.Contains(e.Message, "DUP") {
		t.Fatalf("duplicate: %d %+v", st, e)
	}
}

func TestSecretGetByIDOrName(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	want := h.createTestSecret("GET_ME")
	for _, ref := range []string{want.ID, "GET_ME"} {
		var got secretDTO
		if st := h.call("GET", "/secret/"+ref, nil, &got); st != http.StatusOK || !jsonEqual(t, got, want) {
			t.Fatalf("get %s: %d %+v, want %+v", ref, st, got, want)
		}
	}
	if st := h.call("GET", "/secret/nope", nil, nil); st != http.StatusNotFound {
		t.Fatalf("get unknown: %d", st)
	}
}

func TestSecretUpdateKeepsOmittedFields(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	made := h.createTestSecret("UPD")
	var got secretDTO
	if st := h.call("PATCH", "/secret/"+made.ID, map[string]any{"hosts": []string{"new.example.com"}}, &got); st != http.StatusOK {
		t.Fatalf("patch hosts: %d", st)
	}
	if !slices.Equal(got.Hosts, []string{"new.example.com"}) || got.Name != "UPD" || got.CreatedAt != made.CreatedAt {
		t.Fatalf("after patching hosts: %+v", got)
	}
	if st := h.call("PATCH", "/secret/"+made.ID, map[string]any{"description": "d"}, &got); st != http.StatusOK || got.Description != "d" || !slices.Equal(got.Hosts, []string{"new.example.com"}) {
		t.Fatalf("after patching the description: %d %+v", st, got)
	}
}

func TestSecretDelete(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	made := h.createTestSecret("DEL")
	if st := h.call("DELETE", "/secret/"+made.ID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	if st := h.call("GET", "/secret/"+made.ID, nil, nil); st != http.StatusNotFound {
		t.Fatalf("get after delete: %d", st)
	}
	// The name is free again.
	h.createTestSecret("DEL")
}

func TestSecretDeleteInUseIsConflict(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	made := h.createTestSecret("USED")
	sb := h.create(map[string]any{"name": "holder", "secrets": []map[string]string{{"KEY": "USED"}}})
	h.waitState(sb.ID, stateStarted)
	var e apiError
	if st := h.call("DELETE", "/secret/"+made.ID, nil, &e); st != http.StatusConflict || !strings.Contains(e.Message, "holder") {
		t.Fatalf("delete in use: %d %+v", st, e)
	}
	if st := h.call("GET", "/secret/"+made.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("the refused delete removed it: %d", st)
	}
	if st := h.call("PUT", "/sandbox/holder/secrets", map[string]any{"secrets": []map[string]string{}}, nil); st != http.StatusOK {
		t.Fatalf("detach: %d", st)
	}
	if st := h.call("DELETE", "/secret/"+made.ID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete once detached: %d", st)
	}
}

func TestSecretOtherOrganizationNotFound(t *testing.T) {
	dir := t.TempDir()
	other := newOrgKey(t, dir, "b", "team-b")
	h := newHarness(t, newFakeEngine(t), harnessOptions{stateDir: dir})
	made := h.createTestSecret("MINE")
	for _, c := range []struct{ method, path string }{
		{"GET", "/secret/" + made.ID}, {"GET", "/secret/MINE"},
		{"PATCH", "/secret/" + made.ID}, {"DELETE", "/secret/" + made.ID},
	} {
		var body any
		if c.method == "PATCH" {
			body = map[string]any{"value": "stolen"}
		}
		if st := h.callKey(other, c.method, c.path, body, nil); st != http.StatusNotFound {
			t.Errorf("%s %s with another organization's key: %d", c.method, c.path, st)
		}
	}
	var list listSecretsResponse
	if st := h.callKey(other, "GET", "/secret/paginated", nil, &list); st != http.StatusOK || list.Total != 0 {
		t.Fatalf("the other organization's list: %d %+v", st, list)
	}
	var e apiError
	if st := h.callKey(other, "POST", "/sandbox", map[string]any{"secrets": []map[string]string{{"KEY": "MINE"}}}, &e); st != http.StatusBadRequest {
		t.Fatalf("a create naming another organization's secret: %d %+v", st, e)
	}
}

func TestSecretBadInputChangesNothing(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{badRequests: true})
	ok := []string{"api.example.com"}
	for _, c := range []struct {
		name string
		body map[string]any
		want string // in the message
	}{
		{"no name", map[string]any{"value": "v", "hosts": ok}, "name is required"},
		{"bad name", map[string]any{"name": "1abc", "value": "v", "hosts": ok}, "invalid"},
		{"name with a space", map[string]any{"name": "a b", "value": "v", "hosts": ok}, "invalid"},
		{"empty value", map[string]any{"name": "A", "value": "", "hosts": ok}, "empty"},
		{"value over 64 KiB", map[string]any{"name": "A", "value": strings.Repeat("v", sandbox.MaxSecretValue+1), "hosts": ok}, "64 KiB"},
		{"value with a line break", map[string]any{"name": "A", "value": "a\nb", "hosts": ok}, "line break"},
		{"no hosts", map[string]any{"name": "A", "value": "v"}, "hosts is required"},
		{"a URL as host", map[string]any{"name": "A", "value": "v", "hosts": []string{"https://api.example.com/"}}, "not a host name"},
		{"an IP as host", map[string]any{"name": "A", "value": "v", "hosts": []string{"10.0.0.1"}}, "not a host name"},
		{"a port", map[string]any{"name": "A", "value": "v", "hosts": []string{"api.example.com:443"}}, "not a host name"},
		{"long description", map[string]any{"name": "A", "value": "v", "hosts": ok, "description": strings.Repeat("d", maxSecretDescription+1)}, "description"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			if st := h.call("POST", "/secret", c.body, &e); st != http.StatusBadRequest || !strings.Contains(e.Message, c.want) {
				t.Fatalf("%d %+v, want 400 saying %q", st, e, c.want)
			}
			if v, _ := c.body["value"].(string); len(v) > 1 && strings.Contains(e.Message, v) {
				t.Fatalf("the error holds the value: %q", e.Message)
			}
		})
	}
	var list []secretDTO
	if h.call("GET", "/secret", nil, &list); len(list) != 0 {
		t.Fatalf("bad creates made %+v", list)
	}
}

func TestSecretBadUpdateChangesNothing(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{badRequests: true})
	made := h.createTestSecret("KEEP")
	for _, body := range []map[string]any{
		{"hosts": []string{}}, {"hosts": []string{"*"}}, {"value": ""}, {"value": strings.Repeat("v", sandbox.MaxSecretValue+1)},
	} {
		if st := h.call("PATCH", "/secret/"+made.ID, body, nil); st != http.StatusBadRequest {
			t.Errorf("patch %v: %d, want 400", body, st)
		}
	}
	var got secretDTO
	if h.call("GET", "/secret/"+made.ID, nil, &got); !jsonEqual(t, got, made) {
		t.Fatalf("after bad updates: %+v, want %+v", got, made)
	}
}

func TestSecretListPaginated(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	for _, n := range []string{"B_KEY", "a_key", "C_TOKEN", "D_KEY", "E_KEY"} {
		h.createTestSecret(n)
	}
	var names []string
	cursor, pages := "", 0
	for {
		var page listSecretsResponse
		path := "/secret/paginated?sort=name&order=asc&limit=2&name=KEY"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if st := h.call("GET", path, nil, &page); st != http.StatusOK || page.Total != 4 {
			t.Fatalf("page %d: %d %+v", pages, st, page)
		}
		for _, d := range page.Items {
			names = append(names, d.Name)
		}
		pages++
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if want := []string{"B_KEY", "D_KEY", "E_KEY", "a_key"}; !slices.Equal(names, want) || pages != 2 {
		t.Fatalf("pages %d of %v, want 2 of %v", pages, names, want)
	}
	var desc listSecretsResponse
	if h.call("GET", "/secret/paginated?sort=name", nil, &desc); len(desc.Items) != 5 || desc.Items[0].Name != "a_key" || desc.NextCursor != nil {
		t.Fatalf("by name, desc: %+v", desc)
	}
}

func TestSecretListPaginatedBadQuery(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{badRequests: true})
	for _, q := range []string{"limit=0", "limit=201", "limit=1.5", "sort=value", "order=up", "cursor=%21%21"} {
		if st := h.call("GET", "/secret/paginated?"+q, nil, nil); st != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, st)
		}
	}
}

func TestSandboxCreateWithSecretsGivesTheEngineTheirValues(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	h.createTestSecret("anthropic-prod")
	sb := h.create(map[string]any{"secrets": []map[string]string{{"ANTHROPIC_API_KEY": "anthropic-prod"}}})
	h.waitState(sb.ID, stateStarted)
	got, _ := eng.secretsOf(sb.ID)
	if len(got) != 1 || got[0].Name != "ANTHROPIC_API_KEY" || got[0].Value != testSecretValue || !slices.Equal(got[0].Hosts, []string{"api.example.com"}) {
		t.Fatalf("the engine's secrets: %v", got)
	}
}

func TestSandboxCreateWithUnknownSecretCreatesNothing(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	h.createTestSecret("KNOWN")
	var e apiError
	st := h.call("POST", "/sandbox", map[string]any{"name": "nope", "secrets": []map[string]string{{"A": "KNOWN"}, {"B": "MISSING"}}}, &e)
	if st != http.StatusBadRequest || !strings.Contains(e.Message, "MISSING") {
		t.Fatalf("create: %d %+v", st, e)
	}
	if _, st := h.get("nope"); st != http.StatusNotFound || eng.called("create") != 0 {
		t.Fatalf("something was created: get %d, engine creates %d", st, eng.called("create"))
	}
}

func TestSandboxCreateWithBadSecretVariableCreatesNothing(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	h.createTestSecret("KNOWN")
	for _, env := range []string{"1KEY", "MY-KEY", "A B", ""} {
		var e apiError
		if st := h.call("POST", "/sandbox", map[string]any{"name": "nope", "secrets": []map[string]string{{env: "KNOWN"}}}, &e); st != http.StatusBadRequest {
			t.Errorf("variable %q: %d %+v", env, st, e)
		}
	}
	if _, st := h.get("nope"); st != http.StatusNotFound || eng.called("create") != 0 {
		t.Fatalf("something was created: get %d, engine creates %d", st, eng.called("create"))
	}
}

func TestSandboxSecretsReplace(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	h.createTestSecret("ONE")
	h.createTestSecret("TWO")
	sb := h.create(map[string]any{"secrets": []map[string]string{{"A": "ONE"}}})
	h.waitState(sb.ID, stateStarted)
	var dto apiSandbox
	if st := h.call("PUT", "/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{{"B": "TWO"}, {"C": "ONE"}}}, &dto); st != http.StatusOK || dto.ID != sb.ID {
		t.Fatalf("replace: %d %+v", st, dto)
	}
	if got, _ := eng.secretsOf(sb.ID); len(got) != 2 || got[0].Name != "B" || got[1].Name != "C" {
		t.Fatalf("the engine's secrets after the replace: %v", got)
	}
	var entries []sandboxSecret
	if st := h.call("GET", "/sandbox/"+sb.ID+"/secrets", nil, &entries); st != http.StatusOK || len(entries) != 2 || entries[0].Env != "B" || entries[0].Hosts[0] != "api.example.com" {
		t.Fatalf("GET secrets: %d %+v", st, entries)
	}
	if st := h.call("PUT", "/sandbox/"+sb.ID+"/secrets", map[string]any{"secrets": []map[string]string{}}, nil); st != http.StatusOK {
		t.Fatalf("detach: %d", st)
	}
	if got, _ := eng.secretsOf(sb.ID); len(got) != 0 {
		t.Fatalf("the engine's secrets after detaching all: %v", got)
	}
}

func TestSecretUpdateReappliesToStartedSandboxes(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	made := h.createTestSecret("ROT")
	running := h.create(map[string]any{"secrets": []map[string]string{{"KEY": "ROT"}}})
	stopped := h.create(map[string]any{"secrets": []map[string]string{{"KEY": "ROT"}}})
	h.waitState(running.ID, stateStarted)
	h.waitState(stopped.ID, stateStarted)
	h.call("POST", "/sandbox/"+stopped.ID+"/stop", nil, nil)
	h.waitState(stopped.ID, stateStopped)
	if st := h.call("PATCH", "/secret/"+made.ID, map[string]any{"value": newSecretValue}, nil); st != http.StatusOK {
		t.Fatalf("patch: %d", st)
	}
	if got, _ := eng.secretsOf(running.ID); len(got) != 1 || got[0].Value != newSecretValue {
		t.Fatalf("the started sandbox's secrets after the update: %v", got)
	}
	if got, _ := eng.secretsOf(stopped.ID); len(got) != 1 || got[0].Value != testSecretValue {
		t.Fatalf("the stopped sandbox was given the secret while stopped: %v", got)
	}
	h.call("POST", "/sandbox/"+stopped.ID+"/start", nil, nil)
	h.waitState(stopped.ID, stateStarted)
	if got, _ := eng.secretsOf(stopped.ID); len(got) != 1 || got[0].Value != newSecretValue {
		t.Fatalf("the stopped sandbox's secrets once started: %v", got)
	}
}

func TestSecretValueNeverAnsweredNorLogged(t *testing.T) {
	var log syncLog
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{logf: log.logf})
	var bodies [][]byte
	add := func(st int, body []byte) {
		if st >= 300 {
			t.Fatalf("status %d: %s", st, body)
		}
		bodies = append(bodies, body)
	}
	add(h.raw("POST", "/secret", map[string]any{"name": "LEAK", "value": testSecretValue, "hosts": []string{"api.example.com"}}))
	add(h.raw("GET", "/secret", nil))
	add(h.raw("GET", "/secret/paginated", nil))
	add(h.raw("GET", "/secret/LEAK", nil))
	add(h.raw("PATCH", "/secret/LEAK", map[string]any{"value": newSecretValue}))
	add(h.raw("POST", "/sandbox", map[string]any{"name": "sb", "secrets": []map[string]string{{"KEY": "LEAK"}}}))
	h.waitState("sb", stateStarted)
	add(h.raw("GET", "/sandbox/sb", nil))
	add(h.raw("GET", "/sandbox", nil))
	add(h.raw("GET", "/sandbox/sb/secrets", nil))
	add(h.raw("PUT", "/sandbox/sb/secrets", map[string]any{"secrets": []map[string]string{{"OTHER": "LEAK"}}}))
	closeServer(t, h)
	for i, b := range bodies {
		for _, v := range []string{testSecretValue, newSecretValue} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("answer %d holds the value: %s", i, b)
			}
		}
	}
	if l := log.String(); strings.Contains(l, testSecretValue) || strings.Contains(l, newSecretValue) {
		t.Errorf("the log holds the value: %s", l)
	}
}

func TestSecretEncryptedAtRest(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	h.createTestSecret("AT_REST")
	closeServer(t, h)
	db, err := os.ReadFile(filepath.Join(h.stateDir, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(db, []byte("AT_REST")) {
		t.Fatal("the records do not hold the secret's record at all")
	}
	for _, v := range []string{testSecretValue, base64.StdEncoding.EncodeToString([]byte(testSecretValue))} {
		if bytes.Contains(db, []byte(v)) {
			t.Fatalf("the records hold the value in the clear (%q)", v)
		}
	}
}

func TestSecretKeyFileApart(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	h.createTestSecret("KEYED")
	closeServer(t, h)
	path := filepath.Join(h.stateDir, secretsKeyFile)
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("key file %s: %v, %d bytes", path, st.Mode(), st.Size())
	}
	key, _ := os.ReadFile(path)
	db, err := os.ReadFile(filepath.Join(h.stateDir, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, key) || bytes.Contains(db, []byte(base64.StdEncoding.EncodeToString(key))) {
		t.Fatal("the records hold the key")
	}
}

func TestSecretsSurviveARestart(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	made := h.createTestSecret("KEPT")
	sb := h.create(map[string]any{"secrets": []map[string]string{{"KEY": "KEPT"}}})
	h.waitState(sb.ID, stateStarted)
	closeServer(t, h)
	eng.mu.Lock()
	eng.secrets = nil // what the engine was given before the restart
	eng.mu.Unlock()

	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	var got secretDTO
	if st := h2.call("GET", "/secret/"+made.ID, nil, &got); st != http.StatusOK || !jsonEqual(t, got, made) {
		t.Fatalf("after a restart: %d %+v, want %+v", st, got, made)
	}
	// The started sandbox is given its secrets again, their values
	// opened with the key file.
	waitFor(t, "the secrets given again", func() bool {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		s := eng.secrets[sb.ID]
		return len(s) == 1 && s[0].Value == testSecretValue
	})
}

func TestSecretForkKeepsNames(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	h.createTestSecret("FORKED")
	src := h.create(map[string]any{"secrets": []map[string]string{{"KEY": "FORKED"}}})
	h.waitState(src.ID, stateStarted)
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/"+src.ID+"/fork", map[string]any{}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d", st)
	}
	h.waitState(fork.ID, stateStarted)
	if got, ok := eng.secretsOf(fork.ID); !ok || len(got) != 1 || got[0].Name != "KEY" || got[0].Value != testSecretValue {
		t.Fatalf("the fork's secrets: %v", got)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
