package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/procfs"
	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEnv is a Server listening on a unix socket, with a client for it.
type testEnv struct {
	t      testing.TB
	srv    *Server
	work   string
	client *http.Client
	tr     *http.Transport
	raw    *testEnv // same server, no spec validation
}

const baseURL = "http://sandbox"

// newEnv starts a server. With validate, every request and response is
// checked against Daytona's spec files (use it for well-formed traffic).
func newEnv(t testing.TB, validate bool, mod ...func(*Options)) *testEnv {
	t.Helper()
	var v *spectest.Validator
	if validate {
		v = spectest.Load(t)
	}
	return newEnvWith(t, v, mod...)
}

// bigBody is the size above which the checked environments leave a body
// unchecked: tests that move megabytes would spend their time validating.
const bigBody = 1 << 20

// newErrEnv starts a server whose responses (only) are checked against the
// spec files: for tests that send malformed requests on purpose. An error
// status the spec does not declare for a route (413, an unknown
// route's 404) must still have the ErrorResponse shape. Bodies above
// bigBody are not checked.
func newErrEnv(t testing.TB, mod ...func(*Options)) *testEnv {
	t.Helper()
	return newEnvWith(t, spectest.Load(t).ResponsesOnly().SkipBodiesOver(bigBody), mod...)
}

// newEnvWith starts a server whose traffic v checks (nil: none).
func newEnvWith(t testing.TB, v *spectest.Validator, mod ...func(*Options)) *testEnv {
	t.Helper()
	work := t.TempDir()
	opts := Options{WorkDir: work, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "LANG=C"}}
	for _, f := range mod {
		f(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = work
	var h http.Handler = srv
	if v != nil {
		h = v.Handler(t, srv)
	}
	e := serve(t, srv, h)
	e.work = srv.workDir
	// raw reaches the same server without validation, for traffic the
	// spec files cannot describe.
	e.raw = serve(t, srv, srv)
	e.raw.work = srv.workDir
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// serve listens on a fresh unix socket with handler h and returns a client
// environment for it.
func serve(t testing.TB, srv *Server, h http.Handler) *testEnv {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "tbd")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	e := &testEnv{t: t, srv: srv, client: &http.Client{Transport: tr}, tr: tr}
	// Cleanups run last-in first-out: this one runs after srv.Close.
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
		tr.CloseIdleConnections()
		os.RemoveAll(sockDir)
	})
	return e
}

// do sends a request; body is JSON-encoded unless it is a []byte or an
// io.Reader. hdr lists header name/value pairs.
func (e *testEnv) do(method, path string, body any, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
		ctype = "application/json"
	}
	req, err := http.NewRequest(method, baseURL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, data
}

// expect sends a request and checks the status.
func (e *testEnv) expect(status int, method, path string, body any, hdr ...string) []byte {
	e.t.Helper()
	resp, data := e.do(method, path, body, hdr...)
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, data)
	}
	want := offeredExtensions
	if e.srv.daytona {
		want = "" // Daytona's daemon knows no extension
	}
	if got := resp.Header.Get(toolbox.HeaderExtensions); got != want {
		e.t.Fatalf("%s %s: %s = %q, want %q", method, path, toolbox.HeaderExtensions, got, want)
	}
	return data
}

// expectError checks an ErrorResponse.
func (e *testEnv) expectError(status int, code, method, path string, body any, hdr ...string) toolbox.ErrorResponse {
	e.t.Helper()
	data := e.expect(status, method, path, body, hdr...)
	var er toolbox.ErrorResponse
	if err := json.Unmarshal(data, &er); err != nil {
		e.t.Fatalf("%s %s: error body is not JSON: %v: %s", method, path, err, data)
	}
	if er.StatusCode != status || er.Code != code || er.Message == "" || er.Path == "" || er.Method != method {
		e.t.Fatalf("%s %s: error body %+v, want status %d code %s", method, path, er, status, code)
	}
	if _, err := time.Parse(time.RFC3339, er.Timestamp); err != nil {
		e.t.Fatalf("timestamp %q: %v", er.Timestamp, err)
	}
	return er
}

func (e *testEnv) createSession(id string) {
	e.t.Helper()
	e.expect(http.StatusCreated, "POST", "/process/session", toolbox.CreateSessionRequest{SessionID: id})
}

// sdk are headers of a current SDK.
var sdk = []string{toolbox.HeaderSDKVersion, toolbox.SDKVersion}

// execSync runs a synchronous session command as a current SDK would.
func (e *testEnv) execSync(sid, command string, hdr ...string) toolbox.SessionExecuteResponse {
	e.t.Helper()
	data := e.expect(http.StatusOK, "POST", "/process/session/"+sid+"/exec",
		toolbox.SessionExecuteRequest{Command: command}, append(append([]string(nil), sdk...), hdr...)...)
	var r toolbox.SessionExecuteResponse
	if err := json.Unmarshal(data, &r); err != nil {
		e.t.Fatal(err)
	}
	if r.CmdID == "" || r.ExitCode == nil {
		e.t.Fatalf("exec %q: incomplete answer %s", command, data)
	}
	return r
}

func (e *testEnv) execAsync(sid string, req toolbox.SessionExecuteRequest) string {
	e.t.Helper()
	data := e.expect(http.StatusAccepted, "POST", "/process/session/"+sid+"/exec", req, sdk...)
	var r toolbox.SessionExecuteResponse
	if err := json.Unmarshal(data, &r); err != nil {
		e.t.Fatal(err)
	}
	if r.CmdID == "" || r.ExitCode != nil || r.Output != nil {
		e.t.Fatalf("async exec: unexpected answer %s", data)
	}
	return r.CmdID
}

func (e *testEnv) command(sid, cid string) toolbox.Command {
	e.t.Helper()
	data := e.expect(http.StatusOK, "GET", "/process/session/"+sid+"/command/"+cid, nil)
	var c toolbox.Command
	if err := json.Unmarshal(data, &c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitExit polls until the command has an exit code.
func (e *testEnv) waitExit(sid, cid string) int {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := e.command(sid, cid); c.ExitCode != nil {
			return *c.ExitCode
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("command %s did not end", cid)
	return 0
}

// dial opens a log follow WebSocket.
func (e *testEnv) dial(ctx context.Context, sid, cid string, follow bool, hdr http.Header, protos ...string) (*websocket.Conn, *http.Response) {
	e.t.Helper()
	u := "ws://sandbox/process/session/" + sid + "/command/" + cid + "/logs"
	if follow {
		u += "?follow=true"
	}
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: e.client, HTTPHeader: hdr, Subprotocols: protos})
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	return c, resp
}

// readAll reads binary messages until the server closes; it returns the
// messages and the close status.
func readAll(ctx context.Context, t *testing.T, c *websocket.Conn) ([][]byte, websocket.CloseError) {
	t.Helper()
	var msgs [][]byte
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v", err)
			}
			return msgs, ce
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("got a %v message, want binary", typ)
		}
		msgs = append(msgs, data)
	}
}

// demux splits a marker log.
func demux(raw []byte) (stdout, stderr []byte) {
	var cur *[]byte
	for len(raw) > 0 {
		switch {
		case bytes.HasPrefix(raw, []byte(toolbox.StdoutMarker)):
			cur, raw = &stdout, raw[3:]
			continue
		case bytes.HasPrefix(raw, []byte(toolbox.StderrMarker)):
			cur, raw = &stderr, raw[3:]
			continue
		}
		if cur == nil {
			cur = &stdout
		}
		*cur = append(*cur, raw[0])
		raw = raw[1:]
	}
	return
}

func pidAlive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Live()
}

func readPids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		f := strings.Fields(string(b))
		if len(f) >= n {
			var pids []int
			for _, s := range f[:n] {
				p, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, p)
			}
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: fewer than %d pids", path, n)
	return nil
}

// killRunning fails the test unless pid still runs, then kills it.
func killRunning(t *testing.T, pid int) {
	t.Helper()
	if !pidAlive(pid) {
		t.Errorf("process %d ended before the answer came: the answer waited for it", pid)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
