package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a Server that answers every request with 204 and
// remembers how it was made and whether it was closed.
type fakeServer struct {
	mu     sync.Mutex
	opts   ServerOptions
	closed bool
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
	srv = &fakeServer{}
	e := newFakeEngine(t)
	out := &announced{url: make(chan string, 1)}
	var stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, Config{
			Engine: e, Stdout: out, Stderr: &stderr,
			Getenv: func(string) string { return "" },
			NewServer: func(o ServerOptions) (Server, error) {
				srv.mu.Lock()
				srv.opts = o
				srv.mu.Unlock()
				return srv, nil
			},
		}, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
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
	if r.code != 0 || !strings.Contains(r.stdout, "no API key") {
		t.Fatalf("serve without a key: %v", r)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.opts.APIKeys) != 0 {
		t.Fatalf("keys %q, want none", srv.opts.APIKeys)
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
		{[]string{"--addr", "0.0.0.0:3000"}, "without an API key"},
		{[]string{"--api-key", "a", "--api-key-file", empty}, "exclude each other"},
		{[]string{"--api-key-file", empty}, "first line is empty"},
		{[]string{"--api-key", " "}, "--api-key is empty"},
	} {
		r := h.run(append([]string{"serve"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %q: %v, want exit %d with %q", c.args, r, ExitUsage, c.want)
		}
	}
	// A build without a server says so.
	if r := h.run("serve"); r.code != ExitError || !strings.Contains(r.stderr, "no server") {
		t.Errorf("serve without NewServer: %v", r)
	}
}
