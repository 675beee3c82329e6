package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
)

// testKey is the API key of the test servers.
const testKey = "dtn_serve-test-key"

// harness is a Server on loopback whose every exchange is validated
// against Daytona's spec files, with a client for it.
type harness struct {
	t        *testing.T
	s        *Server
	url      string
	client   *http.Client
	stateDir string
}

// harnessOptions tune newHarness.
type harnessOptions struct {
	// badRequests: the test sends malformed requests on purpose, so only
	// answers are checked.
	badRequests bool
	// now is the server's clock; default time.Now.
	now func() time.Time
	// stateDir holds the server's records; default a new temporary
	// folder.
	stateDir string
	// knobs are the server's test knobs.
	knobs *Knobs
	// published are the operator's images tenants may use; default the
	// images an imageFake starts with (but builds' own).
	published []string
	// buildTimeout is the server's Options.BuildTimeout.
	buildTimeout time.Duration
	// maxSandboxes is the server's Options.MaxSandboxesPerOrg.
	maxSandboxes int
	// connectWithin, when set, is the server's deadline of an event
	// stream's CONNECT.
	connectWithin time.Duration
	// maxQueuedBuilds and maxImageBytes are the server's
	// Options.MaxQueuedBuildsPerOrg and MaxImageBytesPerOrg.
	maxQueuedBuilds int
	maxImageBytes   int64
	// listenerPreviews gives the server's default preview URLs (a
	// listener per previewed port); without, they are host-based under
	// localhost, as they were before issue 27.
	listenerPreviews bool
	// logf is the server's Options.Logf; default none.
	logf func(format string, args ...any)
}

// newHarness starts a Server over eng, ended by the test's cleanup.
func newHarness(t *testing.T, eng engine, o harnessOptions) *harness {
	t.Helper()
	spectest.Dir(t) // before the server starts: a test without the spec files skips here
	if o.now == nil {
		o.now = time.Now
	}
	if o.stateDir == "" {
		o.stateDir = t.TempDir()
	}
	if f, ok := eng.(*imageFake); ok && o.published == nil {
		for _, n := range f.initial {
			if isSnapshotName(n) {
				o.published = append(o.published, n)
			}
		}
	}
	domain := "localhost"
	if o.listenerPreviews {
		domain = ""
	}
	s, err := newServer(Options{APIKeys: []string{testKey}, StateDir: o.stateDir, Knobs: o.knobs, PublishedImages: o.published, BuildTimeout: o.buildTimeout, MaxSandboxesPerOrg: o.maxSandboxes,
		MaxQueuedBuildsPerOrg: o.maxQueuedBuilds, MaxImageBytesPerOrg: o.maxImageBytes, PreviewDomain: domain, Logf: o.logf}, eng, 5*time.Millisecond, o.now)
	if err != nil {
		t.Fatal(err)
	}
	if o.connectWithin > 0 {
		s.connectWithin = o.connectWithin
	}
	srv := validatedServer(t, o, s)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return &harness{t: t, s: s, url: srv.URL, client: srv.Client(), stateDir: o.stateDir}
}

// validatedServer starts a server on loopback that validates every
// exchange of next against Daytona's spec files.
func validatedServer(t testing.TB, o harnessOptions, next http.Handler) *httptest.Server {
	cp := spectest.LoadControlPlane(t).WithBasePath("/api")
	// The toolbox's requests are the client's business; the proxy's
	// own errors (no such sandbox, not started) have the shape of the
	// toolbox's ErrorResponse, which no operation declares.
	tb := spectest.Load(t).ResponsesOnly()
	if o.badRequests {
		cp = cp.ResponsesOnly()
	}
	checked := spectest.ServerHandler(t, cp, tb, next)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if agentboxRoute.MatchString(r.URL.Path) {
			next.ServeHTTP(w, r) // no Daytona document declares it
			return
		}
		checked.ServeHTTP(w, r)
	}))
}

// agentboxRoute matches the paths of agentbox's own API routes, which
// Daytona's spec files do not declare (fork, pause and the others agentbox
// serves are Daytona's): they pass unchecked, and their tests check their
// answers (activity_test.go).
var agentboxRoute = regexp.MustCompile(`^/api/sandbox/[^/]+/activity$`)

// call sends method path (under /api) with body (JSON-encoded unless a
// string or nil) and the test key, and decodes a JSON answer into out
// (when not nil). It returns the status.
func (h *harness) call(method, path string, body, out any) int {
	h.t.Helper()
	return h.callKey(testKey, method, path, body, out)
}

func (h *harness) callKey(key, method, path string, body, out any) int {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.url+"/api"+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			h.t.Fatalf("%s %s: %d %s: decoding: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// apiSandbox is a Sandbox as the tests read it.
type apiSandbox = sandboxDTO

// apiError is the error body.
type apiError struct {
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
}

// create creates a sandbox with body and returns the answer.
func (h *harness) create(body any) apiSandbox {
	h.t.Helper()
	var sb apiSandbox
	if st := h.call("POST", "/sandbox", body, &sb); st != http.StatusOK {
		h.t.Fatalf("create: status %d", st)
	}
	return sb
}

// get returns sandbox idOrName, or its status when not 200.
func (h *harness) get(idOrName string) (apiSandbox, int) {
	h.t.Helper()
	var sb apiSandbox
	st := h.call("GET", "/sandbox/"+idOrName, nil, &sb)
	return sb, st
}

// waitState polls sandbox id until it is in state want ("gone": 404).
func (h *harness) waitState(id, want string) apiSandbox {
	h.t.Helper()
	return h.waitStateKey(testKey, id, want)
}

// waitStateKey is waitState with API key key.
func (h *harness) waitStateKey(key, id, want string) apiSandbox {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var sb apiSandbox
		st := h.callKey(key, "GET", "/sandbox/"+id, nil, &sb)
		if want == "gone" && st == http.StatusNotFound || st == http.StatusOK && sb.State == want {
			return sb
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("sandbox %s: state %q (status %d, error %q), want %q", id, sb.State, st, sb.ErrorReason, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClock is a clock tests move.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
