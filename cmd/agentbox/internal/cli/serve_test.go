package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// fakeServer is a Server that answers every request with 204 and
// remembers how it was made and whether it was closed.
type fakeServer struct {
	mu     sync.Mutex
	opts   ServerOptions
	closed bool
	// stored: the server has keys of its records.
	stored bool
}

func (s *fakeServer) AuthRequired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored || len(s.opts.APIKeys) > 0
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

func (s *fakeServer) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// announced is a Writer that reports the URL serve prints.
type announced struct {
	mu  sync.Mutex
	buf bytes.Buffer
	url chan string
}

var apiURL = regexp.MustCompile(`Daytona API at (http://\S+)/api`)

func (a *announced) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	had := apiURL.Match(a.buf.Bytes())
	a.buf.Write(p)
	if m := apiURL.FindSubmatch(a.buf.Bytes()); !had && m != nil {
		a.url <- string(m[1])
	}
	return len(p), nil
}

func (a *announced) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

// runServe runs agentbox serve with args over a fakeServer until stop is
// called, and returns the server's URL.
func runServe(t *testing.T, args ...string) (url string, srv *fakeServer, stop func() result) {
	t.Helper()
	return runServeOn(t, &fakeServer{}, args...)
}

// serveConfig is the Config of a serve over srv.
func serveConfig(t *testing.T, srv *fakeServer, stdout, stderr io.Writer) Config {
	return Config{
		Engine: newFakeEngine(t), Stdout: stdout, Stderr: stderr,
		Getenv: func(string) string { return "" },
		NewServer: func(o ServerOptions) (Server, error) {
			srv.mu.Lock()
			srv.opts = o
			srv.mu.Unlock()
			return srv, nil
		},
	}
}

// runServeOn is runServe over srv.
func runServeOn(t *testing.T, srv *fakeServer, args ...string) (url string, _ *fakeServer, stop func() result) {
	t.Helper()
	out := &announced{url: make(chan string, 1)}
	var stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, serveConfig(t, srv, out, &stderr), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
	}()
	stop = func() result {
		cancel()
		code := <-done
		return result{code, out.String(), stderr.String()}
	}
	select {
	case url = <-out.url:
	case code := <-done:
		t.Fatalf("serve exited %d before serving: %s %s", code, out.String(), stderr.String())
	case <-time.After(20 * time.Second):
		stop()
		t.Fatal("serve did not announce its URL")
	}
	return url, srv, stop
}

func TestServe(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("dtn_secret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, srv, stop := runServe(t, "--api-key-file", keyFile)
	resp, err := http.Get(url + "/api/config")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("GET through serve: %d, want the server's 204", resp.StatusCode)
	}
	r := stop()
	if r.code != 0 || !strings.Contains(r.stdout, "the sandboxes keep running") {
		t.Fatalf("serve after an interrupt: %v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "dtn_secret") {
		t.Fatalf("serve printed the API key: %v", r)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !srv.closed || !slices.Equal(srv.opts.APIKeys, []string{"dtn_secret"}) || srv.opts.StateDir == "" {
		t.Fatalf("server closed %v, options %+v", srv.closed, srv.opts)
	}
}

func TestServeWithoutKeySaysSo(t *testing.T) {
	_, srv, stop := runServe(t)
	r := stop()
	if r.code != 0 || !strings.Contains(r.stderr, "warning: no API key") || !strings.Contains(r.stderr, "--generate-key") {
		t.Fatalf("serve without a key: %v", r)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.opts.APIKeys) != 0 {
		t.Fatalf("keys %q, want none", srv.opts.APIKeys)
	}
}

// --generate-key makes a random key for the run, prints it once in the
// line to export, and passes the server the tenants' options.
func TestServeGenerateKey(t *testing.T) {
	_, srv, stop := runServe(t, "--generate-key", "--publish-image", "team/tools:1", "--allow-registry", "127.0.0.1:5000", "--build-timeout", "5m", "--max-sandboxes-per-org", "7", "--max-queued-builds-per-org", "3", "--max-image-disk-per-org", "20")
	r := stop()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	o := srv.opts
	if r.code != 0 || len(o.APIKeys) != 1 || !strings.HasPrefix(o.APIKeys[0], "dtn_") || len(o.APIKeys[0]) < 40 {
		t.Fatalf("serve --generate-key: %v, keys %q", r, o.APIKeys)
	}
	if !strings.Contains(r.stdout, "DAYTONA_API_KEY="+o.APIKeys[0]) || strings.Count(r.stdout+r.stderr, o.APIKeys[0]) != 1 || strings.Contains(r.stderr, "warning") {
		t.Fatalf("serve --generate-key printed %v", r)
	}
	if !slices.Equal(o.PublishedImages, []string{"team/tools:1"}) || !slices.Equal(o.AllowRegistries, []string{"127.0.0.1:5000"}) || o.BuildTimeout != 5*time.Minute || o.MaxSandboxesPerOrg != 7 || o.MaxQueuedBuildsPerOrg != 3 || o.MaxImageGiBPerOrg != 20 {
		t.Fatalf("options %+v", o)
	}
}

func TestServeUsage(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-key", "a", "--api-key-file", empty}, "exclude each other"},
		{[]string{"--api-key-file", empty}, "first line is empty"},
		{[]string{"--api-key", " "}, "--api-key is empty"},
		{[]string{"--api-key", "a", "--generate-key"}, "exclude each other"},
	} {
		r := h.run(append([]string{"serve"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %q: %v, want exit %d with %q", c.args, r, ExitUsage, c.want)
		}
	}
	// Without any key, serve refuses to listen beyond loopback, and
	// closes the server it made.
	srv := &fakeServer{}
	var stderr bytes.Buffer
	if code := Run(context.Background(), serveConfig(t, srv, io.Discard, &stderr), []string{"serve", "--addr", "0.0.0.0:0"}); code != ExitUsage || !strings.Contains(stderr.String(), "without an API key") {
		t.Errorf("serve on 0.0.0.0 without a key: exit %d %s", code, stderr.String())
	}
	if !srv.closed {
		t.Error("serve left the server it refused open")
	}
	// A build without a server says so.
	if r := h.run("serve"); r.code != ExitError || !strings.Contains(r.stderr, "no server") {
		t.Errorf("serve without NewServer: %v", r)
	}
}

func TestServeWithStoredKeys(t *testing.T) {
	// The keys of the server's records are keys: serve says so, and may
	// listen beyond loopback.
	_, _, stop := runServeOn(t, &fakeServer{stored: true}, "--addr", "0.0.0.0:0")
	r := stop()
	if r.code != 0 || strings.Contains(r.stdout, "no API key") || !strings.Contains(r.stdout, "DAYTONA_API_KEY=<your key>") {
		t.Fatalf("serve with the records' keys: %v", r)
	}
}

// fakeKeys is a ServerKeys in memory.
type fakeKeys struct {
	keys    []ServerKey
	secrets []string
}

func (f *fakeKeys) CreateKey(_ context.Context, _, name, org string) (ServerKey, string, error) {
	k := ServerKey{ID: "id" + strconv.Itoa(len(f.keys)), Name: name, OrganizationID: org, CreatedAt: time.Now()}
	secret := "dtn_secret" + k.ID
	f.keys, f.secrets = append(f.keys, k), append(f.secrets, secret)
	return k, secret, nil
}

func (f *fakeKeys) Keys(context.Context, string) ([]ServerKey, error) { return f.keys, nil }

func (f *fakeKeys) RemoveKey(_ context.Context, _, idOrName string) error {
	i := slices.IndexFunc(f.keys, func(k ServerKey) bool { return k.ID == idOrName || k.Name == idOrName })
	if i < 0 {
		return fmt.Errorf("no key %s: %w", idOrName, sandbox.ErrNotFound)
	}
	f.keys = slices.Delete(f.keys, i, i+1)
	return nil
}

func TestServeKeys(t *testing.T) {
	keys := &fakeKeys{}
	run := func(args ...string) result {
		var out, errw bytes.Buffer
		code := Run(context.Background(), Config{Engine: newFakeEngine(t), ServerKeys: keys, Stdout: &out, Stderr: &errw,
			Getenv: func(string) string { return "" }}, append([]string{"--state-dir", t.TempDir(), "serve", "keys"}, args...))
		return result{code, out.String(), errw.String()}
	}
	// create prints the key, alone on stdout, once.
	r := run("create", "--name", "ci", "--org", "team-a")
	if r.code != 0 || r.stdout != "dtn_secretid0\n" || !strings.Contains(r.stderr, "team-a") {
		t.Fatalf("keys create: %v", r)
	}
	if k := keys.keys[0]; k.Name != "ci" || k.OrganizationID != "team-a" {
		t.Fatalf("created %+v", k)
	}
	run("create")
	// ls shows ids, names, organizations; never a key.
	r = run("ls")
	if r.code != 0 || !strings.Contains(r.stdout, "id0") || !strings.Contains(r.stdout, "team-a") || !strings.Contains(r.stdout, "ORGANIZATION") || strings.Contains(r.stdout, "dtn_") {
		t.Fatalf("keys ls: %v", r)
	}
	var listed []ServerKey
	if r = run("--json", "ls"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &listed) != nil || len(listed) != 2 || strings.Contains(r.stdout, "dtn_") {
		t.Fatalf("keys ls --json: %v", r)
	}
	if r = run("rm", "ci"); r.code != 0 || len(keys.keys) != 1 {
		t.Fatalf("keys rm ci: %v, keys %+v", r, keys.keys)
	}
	if r = run("rm", "ci"); r.code != ExitError || !strings.Contains(r.stderr, "no key ci") {
		t.Fatalf("keys rm of a removed key: %v", r)
	}
	if r = run("rm"); r.code != ExitUsage {
		t.Fatalf("keys rm without a key: %v", r)
	}
}
