package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(runHelper())
	}
	goleak.VerifyTestMain(m)
}

// countingTransport counts the requests (WebSocket handshakes included)
// and can hide the server's agentbox extensions, making it look like a
// plain Daytona daemon to the client.
type countingTransport struct {
	next  http.RoundTripper
	plain bool
	n     atomic.Int64

	mu  sync.Mutex
	log []string
	// gate, when set, runs before each request is sent: a test holds
	// requests back with it.
	gate atomic.Pointer[func(*http.Request)]
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if g := t.gate.Load(); g != nil {
		(*g)(r)
	}
	t.n.Add(1)
	t.mu.Lock()
	t.log = append(t.log, r.Method+" "+r.URL.Path)
	t.mu.Unlock()
	if t.plain {
		r = r.Clone(r.Context())
		r.Header.Del(toolbox.HeaderUseExtensions)
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && t.plain {
		resp.Header.Del(toolbox.HeaderExtensions)
	}
	return resp, err
}

// requests returns the count of requests made so far and the log since the
// previous call.
func (t *countingTransport) take() (int64, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.log
	t.log = nil
	return int64(len(l)), l
}

// stubHost is a Host with an environment overlay that counts starts.
type stubHost struct {
	mu      sync.Mutex
	env     map[string]string
	err     error
	ensured atomic.Int64
}

func (h *stubHost) EnsureRunning(ctx context.Context) error {
	h.ensured.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *stubHost) MergeEnv(perCall map[string]string) (map[string]string, error) {
	if err := sandbox.ValidateEnv(perCall); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := maps.Clone(h.env)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, perCall)
	return out, nil
}

type harness struct {
	m      *Manager
	client *toolbox.Client
	rt     *countingTransport
	host   *stubHost
	srv    *daemon.Server
	dir    string // the sandbox's work dir
	sock   string // the daemon's unix socket
	wire   http.RoundTripper
	mo     Options
}

type harnessOptions struct {
	plain   bool // hide the agentbox extensions
	daytona bool // the daemon's Daytona-behaviour mode (set plain too)
	noSpec  bool // skip the spec checks (they copy every body): for tests that count allocations
	manager Options
	env     []string // the daemon's base environment
}

// serverMode is how a harness's daemon presents itself: agentbox's server
// with its extensions, the same with the extensions hidden (plain), or the
// daemon's Daytona-behaviour mode, which has none and Daytona's quirks.
type serverMode struct {
	name           string
	plain, daytona bool
}

var (
	serverModes = []serverMode{{"extensions", false, false}, {"plain", true, false}, {"daytona", true, true}}
	plainModes  = serverModes[1:]
)

// with returns ho in mode m.
func (m serverMode) with(ho harnessOptions) harnessOptions {
	ho.plain, ho.daytona = m.plain, m.daytona
	return ho
}

// newHarness serves a real toolbox daemon over a unix socket and returns a
// Manager talking to it.
func newHarness(t testing.TB, ho harnessOptions) *harness {
	t.Helper()
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "agentbox-proc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "toolbox.sock")
	env := ho.env
	if env == nil {
		env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8"}
	}
	srv, err := daemon.New(daemon.Options{WorkDir: dir, Env: env, Daytona: ho.daytona})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// Every test checks the traffic against Daytona's spec files, on both
	// sides: what the daemon answers and what the client sends and gets
	// (in plain mode the client's side sees the exchange with the
	// extension headers hidden). Benchmarks skip the costly checks, and
	// bodies above a megabyte are not checked (their status, headers and
	// media type are): validating the JSON of a command that prints 8 MiB
	// took over 30 s under the race detector on a loaded machine.
	_, bench := t.(*testing.B)
	var spec *spectest.Validator
	if !bench && !ho.noSpec {
		spec = spectest.Load(t).SkipBodiesOver(1 << 20)
	}
	var handler http.Handler = srv
	if spec != nil {
		handler = spec.Handler(t, srv)
	}
	hs := &http.Server{Handler: handler}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 32,
	}
	var wire http.RoundTripper = tr
	if spec != nil {
		wire = spec.Transport(t, tr)
	}
	rt := &countingTransport{next: wire, plain: ho.plain}
	client, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://sandbox", HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	host := &stubHost{}
	mo := ho.manager
	mo.Client, mo.Host = client, host
	h := &harness{m: NewManager(mo), client: client, rt: rt, host: host, srv: srv, dir: dir, sock: sock, wire: wire, mo: mo}
	t.Cleanup(func() {
		h.close(t)
		// Let requests the client abandoned (a cancelled poll) finish
		// while the daemon still runs. Shutdown also waits for the
		// handlers, so that the validator never reports after the test
		// has ended; WebSocket followers (hijacked) end with srv.Close.
		tr.CloseIdleConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
		srv.Close()
		hs.Close()
		<-served
		tr.CloseIdleConnections()
	})
	return h
}

// another returns a harness on the same sandbox whose Manager, with a
// client and request count of its own, shares nothing with h's but the
// daemon, as in another process. The Manager is closed when the test ends,
// before the daemon.
func (h *harness) another(t testing.TB) *harness {
	t.Helper()
	rt := &countingTransport{next: h.wire, plain: h.rt.plain}
	client, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://sandbox", HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	mo := h.mo
	mo.Client = client
	o := *h
	o.m, o.client, o.rt = NewManager(mo), client, rt
	t.Cleanup(func() { o.close(t) })
	return &o
}

// close closes the harness's Manager and client.
func (h *harness) close(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Errorf("Manager.Close: %v", err)
	}
	h.client.Close()
}

// exec runs Execute and fails the test on error.
func (h *harness) exec(t testing.TB, command string, args []string, opts *sandbox.ExecOptions) *sandbox.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.m.Execute(ctx, command, args, opts)
	if err != nil {
		t.Fatalf("Execute(%q): %v", command, err)
	}
	return r
}

// warm runs one command so that the pool holds a session and the client
// knows the server's extensions.
func (h *harness) warm(t testing.TB) {
	t.Helper()
	h.exec(t, "true", nil, nil)
	h.rt.take()
}

// requests returns how many requests were made since the previous call.
func (h *harness) requests() (int64, []string) { return h.rt.take() }

// processGone reports whether pid no longer runs (gone or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// waitFor polls cond until it holds, failing the test with what after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after 10s for %s", what)
		}
		time.Sleep(delay)
	}
}

// waitGone waits for pid to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("process %d to end", pid), func() bool { return processGone(pid) })
}

// readPID waits for a file holding a pid and returns it.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var b []byte
	waitFor(t, "pid file "+path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && bytes.HasSuffix(b, []byte("\n"))
	})
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// failingWriter fails every write.
type failingWriter struct{}

var errWriter = errors.New("writer broke")

func (failingWriter) Write(p []byte) (int, error) { return 0, errWriter }

// errorsTB records the failures the spec validator reports.
type errorsTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *errorsTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *errorsTB) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// TestHarnessValidatesTraffic proves that the harness checks traffic
// against the spec on the server and the client side, in both modes.
func TestHarnessValidatesTraffic(t *testing.T) {
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			rec := &errorsTB{TB: t}
			h := newHarness(rec, sm.with(harnessOptions{}))
			h.exec(t, "true", nil, nil)
			if got := rec.reported(); len(got) != 0 {
				t.Fatalf("valid traffic reported: %q", got)
			}
			// A request no spec describes: the client transport and the
			// server middleware each report it.
			req, err := http.NewRequest("POST", "http://sandbox/process/execute", strings.NewReader(`{"cmd":"true"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Transport: h.rt}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := rec.reported()
			if len(got) < 2 || !strings.Contains(got[0], "command") || !strings.Contains(got[1], "command") {
				t.Fatalf("reported %q, want the missing command from both sides", got)
			}
		})
	}
}
