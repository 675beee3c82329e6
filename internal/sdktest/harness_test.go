package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// apiKey is the API key the SDK sends: a dummy, nothing leaves loopback.
const apiKey = "dtn_agentbox-sdktest-not-a-real-key"

// aliases are the SDK releases the test runs: npm aliases of
// testdata/node/package.json.
var aliases = []string{"sdk-0.205", "sdk-latest"}

// sandboxPath is the PATH of the sandboxes' commands: Debian's default.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// driverTimeout bounds one run of testdata/node/driver.mjs; each step has 30 s.
const driverTimeout = 3 * time.Minute

// nodeProject is node and the npm project of the feature scripts.
type nodeProject struct {
	node     string
	dir      string            // testdata/node, absolute
	versions map[string]string // alias → the release's version
}

// findNode finds node and the SDK releases installed in testdata/node,
// or skips (fails under AGENTBOX_REQUIRE_ALL=1) saying how to install them.
func findNode(t testing.TB) nodeProject {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Skipf(t, "node is not installed (Debian package nodejs): %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	p := nodeProject{node: node, dir: dir, versions: map[string]string{}}
	for _, alias := range aliases {
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", alias, "package.json"))
		if err != nil {
			testenv.Skipf(t, "the Daytona SDK is not installed (%v): run scripts/test.sh, or npm ci --ignore-scripts --prefix %s", err, dir)
		}
		var pkg struct{ Version string }
		if err := json.Unmarshal(data, &pkg); err != nil || pkg.Version == "" {
			t.Fatalf("node_modules/%s/package.json: no version (%v): reinstall with npm ci --ignore-scripts --prefix %s", alias, err, dir)
		}
		p.versions[alias] = pkg.Version
	}
	return p
}

// A controlPlane is a stub of Daytona's control plane on loopback. It
// serves the sandboxes added to it (GET /api/sandbox/{id}), each with a
// toolboxProxyUrl pointing back at the stub, and forwards
// {base}/toolbox/{id}/… to that sandbox's toolbox server with the prefix
// stripped, as Daytona's proxy does, WebSocket upgrades included. Every
// control-plane exchange is checked against api.json, and every toolbox
// answer against toolbox.json (responses only: the SDK's requests are its
// own business).
type controlPlane struct {
	base string         // http://127.0.0.1:port
	mux  *http.ServeMux // the stub's routes; tests may add some (git)

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	unexpected []string // requests the stub does not serve
}

// A sandbox is one toolbox server of a controlPlane.
type sandbox struct {
	id       string
	work     string            // the toolbox server's work dir
	plane    *controlPlane     // serving it
	proxy    http.Handler      // to its toolbox server, prefix stripped
	gitHeads map[string]string // the served repository's branches (git feature)
	offSpec  *collector        // its answers that toolbox.json does not allow

	mu     sync.Mutex
	failed []string // toolbox requests answered with an error status
}

// logFailed logs the toolbox requests of s that got an error status: what
// an SDK's error message may not say (a WebSocket refused with 404).
func (s *sandbox) logFailed(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) > 0 {
		t.Logf("toolbox requests answered with an error:\n%s", strings.Join(s.failed, "\n"))
	}
}

// A collector keeps what a spectest handler reports (Errorf), so that the
// test of the feature that caused it can report it.
type collector struct {
	testing.TB
	mu  sync.Mutex
	err error // every report, joined
}

func (c *collector) Errorf(format string, args ...any) {
	c.mu.Lock()
	c.err = errors.Join(c.err, fmt.Errorf(format, args...))
	c.mu.Unlock()
}

// report fails t with what c kept.
func (c *collector) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Errorf("answers of the toolbox server do not match the spec files:\n%v", c.err)
	}
}

// newControlPlane starts a control-plane stub, ended by the test's cleanup.
func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := &controlPlane{mux: http.NewServeMux(), sandboxes: map[string]*sandbox{}}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/sandbox/{id}", cp.handleGetSandbox)
	api.HandleFunc("GET /api/sandbox/{id}/toolbox-proxy-url", cp.handleProxyURL)
	api.HandleFunc("/api/", cp.handleUnexpected)
	cp.mux.Handle("/api/", spectest.LoadControlPlane(t).WithBasePath("/api").Handler(t, api))
	cp.mux.HandleFunc("/toolbox/{id}/", cp.handleToolbox)
	cp.mux.HandleFunc("/", cp.handleUnexpected)
	cp.base = serveLoopback(t, authorized(cp.mux), nil)
	return cp
}

// addSandbox starts a toolbox server on loopback and serves it as the
// sandbox id; the test's cleanup ends it.
func (cp *controlPlane) addSandbox(t *testing.T, id string) *sandbox {
	t.Helper()
	s := &sandbox{id: id, work: t.TempDir(), plane: cp, offSpec: &collector{TB: t}}
	srv, err := daemon.New(daemon.Options{
		WorkDir: s.work,
		// A sandbox's PATH, not the test's: a version manager's shims
		// (pyenv's python3) take seconds to start on a loaded machine.
		Env: []string{"PATH=" + sandboxPath, "HOME=" + s.work, "LANG=C.UTF-8"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := spectest.Load(t).ResponsesOnly().SkipBodiesOver(1<<20).Handler(s.offSpec, srv)
	target, err := url.Parse(serveLoopback(t, checked, srv.Close))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	s.proxy = http.StripPrefix("/toolbox/"+id, &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Daytona's proxy checks the token and keeps it from the daemon.
			pr.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode >= 400 {
				s.mu.Lock()
				s.failed = append(s.failed, fmt.Sprintf("%s %s: %s", resp.Request.Method, resp.Request.URL.RequestURI(), resp.Status))
				s.mu.Unlock()
			}
			return nil
		},
	})
	cp.mu.Lock()
	cp.sandboxes[id] = s
	cp.mu.Unlock()
	return s
}

func (cp *controlPlane) sandbox(w http.ResponseWriter, r *http.Request) *sandbox {
	id := r.PathValue("id")
	cp.mu.Lock()
	s := cp.sandboxes[id]
	cp.mu.Unlock()
	if s == nil {
		writeAPIError(w, r, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", id))
	}
	return s
}

func (cp *controlPlane) handleToolbox(w http.ResponseWriter, r *http.Request) {
	if s := cp.sandbox(w, r); s != nil {
		s.proxy.ServeHTTP(w, r)
	}
}

func (cp *controlPlane) handleGetSandbox(w http.ResponseWriter, r *http.Request) {
	if s := cp.sandbox(w, r); s != nil {
		writeJSON(w, s.dto())
	}
}

func (cp *controlPlane) handleProxyURL(w http.ResponseWriter, r *http.Request) {
	if s := cp.sandbox(w, r); s != nil {
		writeJSON(w, map[string]string{"url": cp.base + "/toolbox"})
	}
}

// handleUnexpected answers what the stub does not serve with 404 and
// remembers it: the test reports it.
func (cp *controlPlane) handleUnexpected(w http.ResponseWriter, r *http.Request) {
	cp.mu.Lock()
	cp.unexpected = append(cp.unexpected, r.Method+" "+r.URL.RequestURI())
	cp.mu.Unlock()
	writeAPIError(w, r, http.StatusNotFound, "the test's control-plane stub does not serve "+r.Method+" "+r.URL.Path)
}

func (cp *controlPlane) unexpectedRequests() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.unexpected...)
}

// authorized answers 401 to requests without the API key, as Daytona's
// API and proxy do, except under /git/ (the test's repositories).
func authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/git/") && r.Header.Get("Authorization") != "Bearer "+apiKey {
			writeAPIError(w, r, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sandboxDTO is the control plane's Sandbox, with the fields api.json
// requires and the state an SDK waits for.
type sandboxDTO struct {
	ID              string            `json:"id"`
	OrganizationID  string            `json:"organizationId"`
	Name            string            `json:"name"`
	User            string            `json:"user"`
	Env             map[string]string `json:"env"`
	Labels          map[string]string `json:"labels"`
	Public          bool              `json:"public"`
	NetworkBlockAll bool              `json:"networkBlockAll"`
	Target          string            `json:"target"`
	CPU             int               `json:"cpu"`
	GPU             int               `json:"gpu"`
	Memory          int               `json:"memory"`
	Disk            int               `json:"disk"`
	State           string            `json:"state"`
	DesiredState    string            `json:"desiredState"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	CreatedAt       string            `json:"createdAt"`
	UpdatedAt       string            `json:"updatedAt"`
}

func (s *sandbox) dto() sandboxDTO {
	now := time.Now().UTC().Format(time.RFC3339)
	return sandboxDTO{
		ID:             s.id,
		OrganizationID: "agentbox-sdktest-org",
		Name:           s.id,
		User:           "root",
		Env:            map[string]string{},
		// The SDK's codeRun runs code in the language of this label.
		Labels:          map[string]string{"code-toolbox-language": "python"},
		Target:          "local",
		CPU:             1,
		Memory:          1,
		Disk:            1,
		State:           "started",
		DesiredState:    "started",
		ToolboxProxyURL: s.plane.base + "/toolbox",
		CreatedAt:       now,
		UpdatedAt:       now,
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeAPIError answers with the control plane's error shape.
func writeAPIError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"statusCode": status,
		"error":      http.StatusText(status),
		"message":    msg,
		"path":       r.URL.Path,
		"timestamp":  time.Now().UTC().Format(time.RFC3339),
	})
}

// serveLoopback serves h on a fresh TCP port of 127.0.0.1 until the test's
// cleanup, which runs stop (when not nil) and then waits for the requests
// in flight. It returns the server's URL.
func serveLoopback(t testing.TB, h http.Handler, stop func() error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		if stop != nil {
			if err := stop(); err != nil {
				t.Errorf("stopping the server: %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			t.Errorf("shutting down the loopback server: %v", err)
			_ = hs.Close()
		}
		<-served
	})
	return "http://" + ln.Addr().String()
}

// report is what testdata/node/driver.mjs prints.
type report struct {
	SDK      string                  `json:"sdk"`
	ImportMs int                     `json:"importMs"` // loading the SDK
	Features map[string][]stepResult `json:"features"`
}

type stepResult struct {
	Name   string          `json:"name"`
	OK     bool            `json:"ok"`
	Value  json.RawMessage `json:"value"`
	Error  string          `json:"error"`
	Status int             `json:"status"`
	Code   string          `json:"code"`
	Type   string          `json:"type"`
	Ms     int             `json:"ms"` // how long the step took
}

// failure describes a step that failed in the SDK.
func (r stepResult) failure() string {
	var b strings.Builder
	b.WriteString("the SDK call failed: ")
	if r.Type != "" {
		fmt.Fprintf(&b, "%s: ", r.Type)
	}
	b.WriteString(r.Error)
	if r.Status != 0 || r.Code != "" {
		fmt.Fprintf(&b, " (HTTP %d %s)", r.Status, r.Code)
	}
	return b.String()
}

// A featureRun is one feature of a driver run, as driver.mjs reads it.
type featureRun struct {
	Name      string `json:"name"`
	Module    string `json:"module"`
	SandboxID string `json:"sandboxId"`
	Work      string `json:"work"`
	Args      any    `json:"args,omitempty"`
}

// run runs testdata/node/driver.mjs with the SDK release alias over the features,
// whose sandboxes cp serves, and returns its report. It fails the test
// when the driver does not print one.
func (cp *controlPlane) run(t *testing.T, p nodeProject, alias string, features []featureRun) report {
	t.Helper()
	encoded, err := json.Marshal(features)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stdout, runErr := p.runNode(t, "driver.mjs", cp.base, alias, "AGENTBOX_FEATURES="+string(encoded),
		// Wait by polling: the stub has no Socket.IO event stream.
		"DAYTONA_USE_DEPRECATED_POLLING=true")
	elapsed := time.Since(start)
	if u := cp.unexpectedRequests(); len(u) > 0 {
		t.Logf("requests the control-plane stub does not serve: %s", strings.Join(u, ", "))
	}
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	var rep report
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil || runErr != nil {
		t.Fatalf("node driver.mjs printed no report (exit: %v, decoding: %v):\n%s", runErr, err, stdout)
	}
	var timing strings.Builder
	for _, f := range features {
		fmt.Fprintf(&timing, "\n%s:", f.Name)
		for _, r := range rep.Features[f.Name] {
			fmt.Fprintf(&timing, " %s %d ms;", r.Name, r.Ms)
		}
	}
	t.Logf("node ran %v, SDK %s loaded in %d ms; steps:%s", elapsed.Round(time.Millisecond), rep.SDK, rep.ImportMs, timing.String())
	return rep
}

// runNode runs the program script of testdata/node with the SDK release
// alias against the control plane at base (DAYTONA_API_URL base/api, the
// test's API key), with the extra environment variables env, and returns
// its standard output and exit error; it logs its standard error.
func (p nodeProject) runNode(t testing.TB, script, base, alias string, env ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), driverTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, script)
	cmd.Dir = p.dir
	// Only what the program needs: no proxy variables, no user config.
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DAYTONA_API_URL=" + base + "/api",
		"DAYTONA_API_KEY=" + apiKey,
		"DAYTONA_TARGET=local",
		"AGENTBOX_SDK=" + alias,
	}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("node %s stderr:\n%s", script, stderr.Bytes())
	}
	return stdout.Bytes(), errors.Join(err, ctx.Err())
}
