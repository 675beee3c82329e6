package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// secretValue is the value the secrets tests send: no answer, error or
// formatted type may hold it.
const secretValue = "sk-daytona-test-8e2f61c4"

// fakeSecrets is a stand-in of Daytona's /secret routes (and of the
// sandbox routes that take secrets), every exchange checked against
// api.json on both sides.
type fakeSecrets struct {
	mu       sync.Mutex
	secrets  []Secret          // by creation
	values   map[string]string // id → value
	creates  []json.RawMessage // bodies of POST /sandbox
	attached []json.RawMessage // bodies of PUT /sandbox/{id}/secrets
	next     int
}

// newFakeSecrets starts the stand-in and returns it with a client of it.
func newFakeSecrets(t *testing.T) (*fakeSecrets, *Client) {
	t.Helper()
	noDaytonaEnv(t)
	cp := spectest.LoadControlPlane(t).WithBasePath("/api")
	f := &fakeSecrets{values: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/secret", f.create)
	mux.HandleFunc("GET /api/secret/paginated", f.list)
	mux.HandleFunc("GET /api/secret/{id}", f.withSecret(func(w http.ResponseWriter, _ *http.Request, s *Secret) { writeAPIJSON(w, 200, s) }))
	mux.HandleFunc("PATCH /api/secret/{id}", f.withSecret(f.update))
	mux.HandleFunc("DELETE /api/secret/{id}", f.withSecret(f.delete))
	mux.HandleFunc("POST /api/sandbox", f.record(&f.creates))
	mux.HandleFunc("PUT /api/sandbox/{id}/secrets", f.record(&f.attached))
	hs := httptest.NewServer(cp.Handler(t, mux))
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := NewClient(Config{APIKey: testKey, APIURL: hs.URL + "/api", HTTPClient: &http.Client{Transport: cp.Transport(t, tr)}, RetryBaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers Daytona's NestJS error body.
func apiError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeAPIJSON(w, status, map[string]any{"statusCode": status, "error": http.StatusText(status), "message": msg, "path": r.URL.Path, "timestamp": "2026-12-01T00:00:00.000Z"})
}

func (f *fakeSecrets) create(w http.ResponseWriter, r *http.Request) {
	var body createSecretBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiError(w, r, 400, err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.secrets {
		if s.Name == body.Name {
			// As a careless server might: the message echoes the request.
			apiError(w, r, 409, fmt.Sprintf("secret %s (value %s) already exists", body.Name, body.Value))
			return
		}
	}
	f.next++
	s := Secret{ID: "sec-" + strconv.Itoa(f.next), Name: body.Name, Description: body.Description, Placeholder: "dtn_secret_" + strconv.Itoa(f.next),
		Hosts: body.Hosts, CreatedAt: "2026-12-01T00:00:00Z", UpdatedAt: "2026-12-01T00:00:00Z"}
	f.secrets = append(f.secrets, s)
	f.values[s.ID] = body.Value
	writeAPIJSON(w, 201, s)
}

// list pages by cursor (the index of the first item), filtered by name
// and sorted by name when asked.
func (f *fakeSecrets) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	var items []Secret
	for _, s := range f.secrets {
		if strings.Contains(s.Name, q.Get("name")) {
			items = append(items, s)
		}
	}
	if q.Get("sort") == "name" {
		sort.Slice(items, func(i, j int) bool { return (items[i].Name < items[j].Name) == (q.Get("order") != "desc") })
	}
	start, _ := strconv.Atoi(q.Get("cursor"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit == 0 {
		limit = 100
	}
	end := min(start+limit, len(items))
	var next *string
	if end < len(items) {
		n := strconv.Itoa(end)
		next = &n
	}
	writeAPIJSON(w, 200, map[string]any{"items": append([]Secret{}, items[start:end]...), "total": len(items), "nextCursor": next})
}

func (f *fakeSecrets) withSecret(h func(http.ResponseWriter, *http.Request, *Secret)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i := range f.secrets {
			if f.secrets[i].ID == r.PathValue("id") {
				h(w, r, &f.secrets[i])
				return
			}
		}
		apiError(w, r, 404, "secret not found")
	}
}

func (f *fakeSecrets) update(w http.ResponseWriter, r *http.Request, s *Secret) {
	var body updateSecretBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiError(w, r, 400, err.Error())
		return
	}
	if body.Value != nil {
		f.values[s.ID] = *body.Value
	}
	if body.Description != nil {
		s.Description = *body.Description
	}
	if body.Hosts != nil {
		s.Hosts = body.Hosts
	}
	writeAPIJSON(w, 200, s)
}

func (f *fakeSecrets) delete(w http.ResponseWriter, _ *http.Request, s *Secret) {
	f.secrets = slices.DeleteFunc(f.secrets, func(o Secret) bool { return o.ID == s.ID })
	w.WriteHeader(http.StatusNoContent)
}

// record keeps the request's body in *into and answers a sandbox.
func (f *fakeSecrets) record(into *[]json.RawMessage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			apiError(w, r, 400, err.Error())
			return
		}
		f.mu.Lock()
		*into = append(*into, body)
		f.mu.Unlock()
		writeAPIJSON(w, 200, map[string]any{"id": "sb-1", "organizationId": "org", "name": "s", "user": "daytona", "env": map[string]string{},
			"labels": map[string]string{}, "public": false, "networkBlockAll": false, "target": "local", "cpu": 1, "gpu": 0, "memory": 1, "disk": 3,
			"toolboxProxyUrl": "http://127.0.0.1:1/toolbox", "state": "started"})
	}
}

// TestCreateSendsSecrets: Options.Secrets goes out on create as the
// spec's array of one-key maps, sorted by variable.
func TestCreateSendsSecrets(t *testing.T) {
	f, c := newFakeSecrets(t)
	o, err := Options{ID: "with-secrets", Secrets: map[string]string{"OPENAI_API_KEY": "openai-prod", "DB_PASSWORD": "DB_PASSWORD"}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := o.createRequest("")
	if _, err := c.CreateSandbox(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Secrets []map[string]string `json:"secrets"`
	}
	if len(f.creates) != 1 || json.Unmarshal(f.creates[0], &got) != nil {
		t.Fatalf("creates: %s", f.creates)
	}
	want := []map[string]string{{"DB_PASSWORD": "DB_PASSWORD"}, {"OPENAI_API_KEY": "openai-prod"}}
	if !reflect.DeepEqual(got.Secrets, want) {
		t.Fatalf("secrets sent %v, want %v", got.Secrets, want)
	}
}

// TestCreateWithoutSecretsOmitsThem: a create without secrets sends no
// secrets field, as Mastra leaves it out.
func TestCreateWithoutSecretsOmitsThem(t *testing.T) {
	o, err := Options{ID: "plain"}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := o.createRequest("")
	data, _ := json.Marshal(req)
	if strings.Contains(string(data), "secrets") {
		t.Fatalf("create body %s", data)
	}
}

// TestOptionsSecretsValidated: a variable that is no env name, or a
// secret name Daytona refuses, fails New with sandbox.ErrInvalidArgument.
func TestOptionsSecretsValidated(t *testing.T) {
	noDaytonaEnv(t)
	for what, refs := range map[string]map[string]string{
		"env name":    {"1BAD": "ok"},
		"secret name": {"GOOD": "bad name!"},
		"empty name":  {"GOOD": ""},
	} {
		_, err := New(Options{APIKey: "k", APIURL: "http://127.0.0.1:1/api", Secrets: refs})
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
}

// TestCloneKeepsSecrets: a clone is made with its template's secrets, as
// its network policy.
func TestCloneKeepsSecrets(t *testing.T) {
	noDaytonaEnv(t)
	sb, err := New(Options{ID: "tmpl", APIKey: "k", APIURL: "http://127.0.0.1:1/api", Secrets: map[string]string{"K": "k-prod"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	clone, err := sb.Clone(CloneOptions{ID: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close(context.Background())
	if req, _ := clone.opts.createRequest(""); !reflect.DeepEqual(req.Secrets, []map[string]string{{"K": "k-prod"}}) {
		t.Fatalf("clone's create sends secrets %v", req.Secrets)
	}
}

// TestSecretsCRUD: create, get, update, list and delete through the
// SecretsService; the server receives the value and answers without it.
func TestSecretsCRUD(t *testing.T) {
	f, c := newFakeSecrets(t)
	ctx := context.Background()
	s, err := c.Secrets().Create(ctx, SecretSpec{Name: "openai-prod", Value: secretValue, Description: "d", Hosts: []string{"API.openai.com."}})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.Placeholder == "" || !slices.Equal(s.Hosts, []string{"api.openai.com"}) || f.values[s.ID] != secretValue {
		t.Fatalf("created %+v", s)
	}
	if got, err := c.Secrets().Get(ctx, s.ID); err != nil || got.Name != "openai-prod" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	v, desc := secretValue+"-2", "rotated"
	got, err := c.Secrets().Update(ctx, s.ID, SecretUpdate{Value: &v, Description: &desc, Hosts: []string{"*.openai.com"}})
	if err != nil || got.Description != "rotated" || !slices.Equal(got.Hosts, []string{"*.openai.com"}) || f.values[s.ID] != v {
		t.Fatalf("update: %+v, %v", got, err)
	}
	if byName, err := c.Secrets().ByName(ctx, "openai-prod"); err != nil || byName.ID != s.ID {
		t.Fatalf("by name: %+v, %v", byName, err)
	}
	if err := c.Secrets().Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Secrets().Get(ctx, s.ID); !errors.Is(err, ErrNotFound) || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// TestSecretsPagination: All walks every page of the paginated route;
// List passes its filter and order.
func TestSecretsPagination(t *testing.T) {
	_, c := newFakeSecrets(t)
	ctx := context.Background()
	var want []string
	for i := range 205 { // two pages of 200
		name := fmt.Sprintf("KEY_%03d", i)
		want = append(want, name)
		if _, err := c.Secrets().Create(ctx, SecretSpec{Name: name, Value: secretValue, Hosts: []string{"x.example.com"}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for s, err := range c.Secrets().All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("All gave %d secrets, want %d in order", len(got), len(want))
	}
	page, err := c.Secrets().List(ctx, ListSecretsOptions{Name: "KEY_20", Sort: "name", Order: "desc", Limit: 2})
	if err != nil || len(page.Items) != 2 || page.Items[0].Name != "KEY_204" || page.Total != 5 || page.NextCursor == nil {
		t.Fatalf("filtered page: %+v, %v", page, err)
	}
}

// TestSecretsConflict: a second create of a name fails matching
// ErrConflict, and the error does not hold the value even when the
// server's message echoes it.
func TestSecretsConflict(t *testing.T) {
	_, c := newFakeSecrets(t)
	ctx := context.Background()
	spec := SecretSpec{Name: "K", Value: secretValue, Hosts: []string{"x.example.com"}}
	if _, err := c.Secrets().Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	_, err := c.Secrets().Create(ctx, spec)
	if !errors.Is(err, ErrConflict) || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("second create: %v, want ErrConflict without the value", err)
	}
}

// TestSecretsNotFound: get, update and delete of an unknown id, and
// ByName of an unknown name, match ErrNotFound and sandbox.ErrNotFound.
func TestSecretsNotFound(t *testing.T) {
	_, c := newFakeSecrets(t)
	ctx := context.Background()
	_, gerr := c.Secrets().Get(ctx, "nope")
	_, uerr := c.Secrets().Update(ctx, "nope", SecretUpdate{Hosts: []string{"x.example.com"}})
	_, nerr := c.Secrets().ByName(ctx, "nope")
	for what, err := range map[string]error{"get": gerr, "update": uerr, "delete": c.Secrets().Delete(ctx, "nope"), "by name": nerr} {
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", what, err)
		}
	}
}

// TestSecretsBadInputSendsNothing: a bad name, an empty or too long
// value, no hosts or a host that is no pattern fail with
// sandbox.ErrInvalidArgument before anything is sent, without the value
// in the error.
func TestSecretsBadInputSendsNothing(t *testing.T) {
	f, c := newFakeSecrets(t)
	ctx := context.Background()
	long := secretValue + strings.Repeat("x", sandbox.MaxSecretValue)
	for what, spec := range map[string]SecretSpec{
		"name":     {Name: "-bad", Value: secretValue, Hosts: []string{"x.example.com"}},
		"empty":    {Name: "K", Hosts: []string{"x.example.com"}},
		"too long": {Name: "K", Value: long, Hosts: []string{"x.example.com"}},
		"no hosts": {Name: "K", Value: secretValue},
		"URL host": {Name: "K", Value: secretValue, Hosts: []string{"https://x.example.com"}},
	} {
		_, err := c.Secrets().Create(ctx, spec)
		if !errors.Is(err, sandbox.ErrInvalidArgument) || strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: %v, want ErrInvalidArgument without the value", what, err)
		}
	}
	_, err := c.Secrets().Update(ctx, "sec-1", SecretUpdate{Value: &long})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || strings.Contains(err.Error(), secretValue) {
		t.Errorf("update: %v", err)
	}
	if len(f.secrets) != 0 {
		t.Fatalf("stored %v", f.secrets)
	}
}

// TestSecretTypesFormatWithoutValue: no fmt verb prints the value of a
// SecretSpec or SecretUpdate.
func TestSecretTypesFormatWithoutValue(t *testing.T) {
	v := secretValue
	for _, x := range []any{SecretSpec{Name: "K", Value: v}, &SecretSpec{Name: "K", Value: v}, SecretUpdate{Value: &v}, &SecretUpdate{Value: &v}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			if s := fmt.Sprintf(verb, x); strings.Contains(s, secretValue) {
				t.Errorf("%s of %T: %s", verb, x, s)
			}
		}
		if data, _ := json.Marshal(x); strings.Contains(string(data), secretValue) {
			t.Errorf("JSON of %T: %s", x, data)
		}
	}
}

// TestUpdateSandboxSecrets: the live update sends the spec's body, an
// empty array to detach all.
func TestUpdateSandboxSecrets(t *testing.T) {
	f, c := newFakeSecrets(t)
	ctx := context.Background()
	if _, err := c.UpdateSandboxSecrets(ctx, "sb-1", map[string]string{"B": "b", "A": "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSandboxSecrets(ctx, "sb-1", nil); err != nil {
		t.Fatal(err)
	}
	if len(f.attached) != 2 || string(f.attached[0]) != `{"secrets":[{"A":"a"},{"B":"b"}]}` || string(f.attached[1]) != `{"secrets":[]}` {
		t.Fatalf("bodies %s", f.attached)
	}
	if _, err := c.UpdateSandboxSecrets(ctx, "sb-1", map[string]string{"A": "bad name"}); !errors.Is(err, sandbox.ErrInvalidArgument) || len(f.attached) != 2 {
		t.Fatalf("bad name: %v", err)
	}
}
