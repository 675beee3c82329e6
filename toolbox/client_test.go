package toolbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const allExt = "frames,stdin,base64"

// env is a fake server and a client talking to it, both validated against
// the Daytona spec files.
type env struct {
	fs    *fakeServer
	srv   *httptest.Server
	c     *toolbox.Client
	conns atomic.Int64 // TCP connections the server accepted
}

func newEnv(t *testing.T, fs *fakeServer, opts toolbox.ClientOptions) *env {
	t.Helper()
	v := spectest.Load(t)
	e := &env{fs: fs}
	if fs.files == "" {
		fs.files = t.TempDir()
	}
	var h http.Handler = fs.handler()
	if !fs.novalidate {
		h = v.Handler(t, h)
	}
	e.srv = httptest.NewUnstartedServer(h)
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.srv.Start()
	base := &http.Transport{}
	if opts.BaseURL == "" && opts.Socket == "" {
		opts.BaseURL = e.srv.URL
	}
	if opts.HTTPClient == nil && opts.Socket == "" {
		opts.HTTPClient = &http.Client{Transport: v.Transport(t, base)}
	}
	c, err := toolbox.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	t.Cleanup(func() {
		c.Close()
		base.CloseIdleConnections()
		e.srv.Close()
	})
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A BaseURL refused shows no user information, the user name included.
func TestNewClientErrorRedactsURLUser(t *testing.T) {
	_, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://tok-user@"})
	if err == nil || strings.Contains(err.Error(), "tok-user") || !strings.Contains(err.Error(), "REDACTED") {
		t.Fatalf("NewClient = %v, want an error with REDACTED for the user name", err)
	}
}

func TestNewClientValidation(t *testing.T) {
	for _, o := range []toolbox.ClientOptions{
		{},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://"},
		{BaseURL: "http://host/?DAYTONA_SANDBOX_AUTH_KEY=x"},
		{BaseURL: "http://user:pw@host"},
		{BaseURL: "http://h", PollInterval: -1},
		{BaseURL: "http://h", Token: "a\nb"},
	} {
		c, err := toolbox.NewClient(o)
		if err == nil {
			c.Close()
			t.Errorf("NewClient(%+v) succeeded, want an error", o)
			continue
		}
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("NewClient(%+v) = %v, want ErrInvalidArgument", o, err)
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("error %q leaks a credential", err)
		}
	}
}

func TestHeadersAndKeepAlive(t *testing.T) {
	const token = "dtn_secret_token_1234"
	e := newEnv(t, newFakeServer(allExt), toolbox.ClientOptions{Token: token})
	ctx := ctxT(t)
	for range 5 {
		v, err := e.c.Version(ctx)
		if err != nil || v != "v0.0.0-fake" {
			t.Fatalf("Version = %q, %v", v, err)
		}
	}
	if d, err := e.c.WorkDir(ctx); err != nil || d != "/work" {
		t.Fatalf("WorkDir = %q, %v", d, err)
	}
	if d, err := e.c.UserHomeDir(ctx); err != nil || d != "/home/daytona" {
		t.Fatalf("UserHomeDir = %q, %v", d, err)
	}
	if n := e.conns.Load(); n != 1 {
		t.Errorf("7 sequential requests used %d connections, want 1 (keep-alive)", n)
	}
	reqs := e.fs.requests()
	if len(reqs) != 7 {
		t.Fatalf("server saw %d requests, want 7", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get(toolbox.HeaderSDKVersion); got != toolbox.SDKVersion {
			t.Errorf("%s = %q", toolbox.HeaderSDKVersion, got)
		}
		if got := r.Header.Get(toolbox.HeaderSource); got != toolbox.SourceName {
			t.Errorf("%s = %q", toolbox.HeaderSource, got)
		}
	}
}

func TestNoTokenNoAuthorization(t *testing.T) {
	e := newEnv(t, newFakeServer(""), toolbox.ClientOptions{Source: "mine", SDKVersion: "1.2.3"})
	if _, err := e.c.Version(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := e.fs.requests()[0]
	if _, ok := r.Header["Authorization"]; ok {
		t.Error("Authorization sent without a token")
	}
	if r.Header.Get(toolbox.HeaderSource) != "mine" || r.Header.Get(toolbox.HeaderSDKVersion) != "1.2.3" {
		t.Errorf("custom source/version not sent: %v", r.Header)
	}
}

func TestUnixSocket(t *testing.T) {
	v := spectest.Load(t)
	fs := newFakeServer(allExt)
	fs.files = t.TempDir()
	sock := filepath.Join(t.TempDir(), "toolbox.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{Handler: v.Handler(t, fs.handler()), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := toolbox.NewClient(toolbox.ClientOptions{Socket: sock, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	if err := c.CreateSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	fs.scripts["hi"] = &fakeCmd{log: []byte("\x01\x01\x01hi\n"), exit: new(int)}
	for range 3 {
		r, err := c.SessionExecute(ctx, "s1", toolbox.SessionExecuteRequest{Command: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Stdout) != "hi\n" || *r.ExitCode != 0 {
			t.Fatalf("exec over unix socket = %+v", r)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("4 requests used %d connections", n)
	}
	if fs.requests()[0].Host != "sandbox" {
		t.Errorf("Host = %q, want sandbox", fs.requests()[0].Host)
	}
}

func TestExtensions(t *testing.T) {
	for _, tc := range []struct {
		ext  string
		want toolbox.Extensions
	}{
		{"", toolbox.Extensions{}},
		{allExt, toolbox.Extensions{Frames: true, Stdin: true, Base64: true}},
		{"Stdin, future", toolbox.Extensions{Stdin: true}},
	} {
		e := newEnv(t, newFakeServer(tc.ext), toolbox.ClientOptions{})
		ctx := ctxT(t)
		got, err := e.c.Extensions(ctx)
		if err != nil || got != tc.want {
			t.Errorf("ext %q: Extensions = %+v, %v; want %+v", tc.ext, got, err, tc.want)
		}
		if _, err := e.c.Extensions(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(e.fs.requests()); n != 1 {
			t.Errorf("ext %q: %d requests for two Extensions calls, want 1 (cached)", tc.ext, n)
		}
	}
}

func TestExecute(t *testing.T) {
	e := newEnv(t, newFakeServer(""), toolbox.ClientOptions{})
	ctx := ctxT(t)
	r, err := e.c.Execute(ctx, toolbox.ExecuteRequest{Command: "ls", Cwd: "/tmp"})
	if err != nil || r.Result != "ran: ls in /tmp" || r.ExitCode != 0 {
		t.Fatalf("Execute = %+v, %v", r, err)
	}
	_, err = e.c.Execute(ctx, toolbox.ExecuteRequest{Command: "sleep", Timeout: 1})
	var ae *toolbox.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 408 || ae.Code != "REQUEST_TIMEOUT" {
		t.Fatalf("timeout: err = %v, want an APIError 408 REQUEST_TIMEOUT", err)
	}
	if _, err := e.c.Execute(ctx, toolbox.ExecuteRequest{Command: "  "}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("blank command: %v", err)
	}
}

func TestSessions(t *testing.T) {
	e := newEnv(t, newFakeServer(""), toolbox.ClientOptions{})
	ctx := ctxT(t)
	if err := e.c.CreateSession(ctx, "a b/c"); err != nil {
		t.Fatal(err)
	}
	var ae *toolbox.APIError
	if err := e.c.CreateSession(ctx, "a b/c"); !errors.As(err, &ae) || ae.StatusCode != 409 {
		t.Fatalf("duplicate session: %v", err)
	}
	s, err := e.c.GetSession(ctx, "a b/c")
	if err != nil || s.SessionID != "a b/c" {
		t.Fatalf("GetSession = %+v, %v", s, err)
	}
	list, err := e.c.ListSessions(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	if err := e.c.DeleteSession(ctx, "a b/c"); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetSession(ctx, "a b/c")
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("GetSession after delete: %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "session not found") || !strings.Contains(err.Error(), "404") {
		t.Errorf("error %q does not say what was not found", err)
	}
	if err := e.c.DeleteSession(ctx, ""); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("empty session id: %v", err)
	}
}

func TestSessionExecuteSplit(t *testing.T) {
	// Bytes a JSON string cannot carry, and marker bytes inside data.
	log := []byte("\x01\x01\x01out\xff\xfe\n\x02\x02\x02err é\n\x01\x01\x01more\n")
	for _, tc := range []struct {
		name, ext, version string
		wantOut            string
	}{
		{"base64", allExt, "", "out\xff\xfe\nmore\n"},
		{"server split", "", "", "out\ufffd\ufffd\nmore\n"},
		{"demux output", "", "old", "out\ufffd\ufffd\nmore\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeServer(tc.ext)
			fs.scripts["run"] = &fakeCmd{log: log, exit: func() *int { i := 3; return &i }()}
			e := newEnv(t, fs, toolbox.ClientOptions{SDKVersion: tc.version})
			ctx := ctxT(t)
			if err := e.c.CreateSession(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			r, err := e.c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "run"})
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Stdout) != tc.wantOut || string(r.Stderr) != "err é\n" || r.ExitCode == nil || *r.ExitCode != 3 || r.CmdID == "" {
				t.Fatalf("result = %+v (stdout %q stderr %q)", r, r.Stdout, r.Stderr)
			}
			// Once the server is known not to offer base64, it is not asked for.
			if tc.ext == "" {
				_, _ = e.c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "run"})
				reqs := e.fs.requests()
				if h := reqs[len(reqs)-1].Header.Get(toolbox.HeaderUseExtensions); h != "" {
					t.Errorf("asked a plain server for %q", h)
				}
			}
		})
	}
}

func TestSessionExecuteAsync(t *testing.T) {
	e := newEnv(t, newFakeServer(allExt), toolbox.ClientOptions{})
	ctx := ctxT(t)
	if err := e.c.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "sleep 9", RunAsync: true})
	if err != nil || r.CmdID == "" || r.ExitCode != nil || r.Stdout != "" {
		t.Fatalf("async = %+v, %v", r, err)
	}
	cmd, err := e.c.GetCommand(ctx, "s", r.CmdID)
	if err != nil || cmd.ExitCode != nil || cmd.Command != "sleep 9" {
		t.Fatalf("GetCommand = %+v, %v", cmd, err)
	}
	if _, err := e.c.SessionExecute(ctx, "nope", toolbox.SessionExecuteRequest{Command: "x"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec in a missing session: %v", err)
	}
}

func TestInput(t *testing.T) {
	for _, ext := range []string{allExt, ""} {
		t.Run("ext="+ext, func(t *testing.T) {
			e := newEnv(t, newFakeServer(ext), toolbox.ClientOptions{})
			ctx := ctxT(t)
			if err := e.c.CreateSession(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			r, err := e.c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "cat", RunAsync: true, SuppressInputEcho: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.c.SendInput(ctx, "s", r.CmdID, []byte("abc")); err != nil {
				t.Fatal(err)
			}
			err = e.c.SendInput(ctx, "s", r.CmdID, []byte{0xff, 0})
			if ext == "" && !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("invalid UTF-8 without the stdin extension: %v", err)
			}
			if ext != "" && err != nil {
				t.Fatalf("binary input with the stdin extension: %v", err)
			}
			closeErr := e.c.CloseInput(ctx, "s", r.CmdID)
			e.fs.mu.Lock()
			c := e.fs.sessions["s"][r.CmdID]
			stdin, closed := string(c.stdin), c.stdinClosed
			e.fs.mu.Unlock()
			if ext != "" {
				if closeErr != nil || stdin != "abc\xff\x00" || !closed {
					t.Fatalf("stdin ext: close %v, stdin %q closed %v; want exact bytes and closed", closeErr, stdin, closed)
				}
			} else {
				if !errors.Is(closeErr, sandbox.ErrUnsupported) {
					t.Fatalf("CloseInput without the extension: %v, want ErrUnsupported", closeErr)
				}
				if stdin != "abc\n" {
					t.Fatalf("Daytona semantics: stdin %q, want a newline appended", stdin)
				}
			}
			e.fs.exit("s", r.CmdID, 0)
			if err := e.c.SendInput(ctx, "s", r.CmdID, []byte("late")); !errors.Is(err, sandbox.ErrExited) {
				t.Fatalf("input after exit: %v, want ErrExited", err)
			}
		})
	}
}

func TestCommandLogs(t *testing.T) {
	for _, ext := range []string{allExt, ""} {
		e := newEnv(t, newFakeServer(ext), toolbox.ClientOptions{})
		ctx := ctxT(t)
		e.fs.addCommand("s", "c")
		e.fs.appendLog("s", "c", []byte("\x01\x01\x01a\n\x02\x02\x02b\n\x01\x01\x01c\n"))
		out, errb, err := e.c.CommandLogs(ctx, "s", "c")
		if err != nil || string(out) != "a\nc\n" || string(errb) != "b\n" {
			t.Fatalf("ext %q: CommandLogs = %q %q %v", ext, out, errb, err)
		}
		if _, _, err := e.c.CommandLogs(ctx, "s", "zz"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("missing command: %v", err)
		}
	}
}

func TestFiles(t *testing.T) {
	e := newEnv(t, newFakeServer(""), toolbox.ClientOptions{})
	ctx := ctxT(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	err := e.c.Upload(ctx,
		toolbox.UploadFile{Path: "/d/one.txt", Content: strings.NewReader("one")},
		toolbox.UploadFile{Path: "/d/sub/big.bin", Content: bytes.NewReader(big)},
	)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e.c.Download(ctx, "/d/sub/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("download: %d bytes, %v", len(got), err)
	}
	list, err := e.c.ListFiles(ctx, "/d")
	if err != nil || len(list) != 2 {
		t.Fatalf("ListFiles = %+v, %v", list, err)
	}
	fi, err := e.c.GetFileInfo(ctx, "/d/one.txt")
	if err != nil || fi.Size != 3 || fi.IsDir || fi.Name != "one.txt" {
		t.Fatalf("GetFileInfo = %+v, %v", fi, err)
	}
	if err := e.c.CreateFolder(ctx, "/x/y", 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(e.fs.files, "x/y")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("folder: %v %v", st, err)
	}
	if err := e.c.Move(ctx, "/d/one.txt", "/x/y/two.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetFileInfo(ctx, "/d/one.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("moved file still there: %v", err)
	}
	if err := e.c.Delete(ctx, "/x", false); err == nil {
		t.Fatal("non-recursive delete of a directory succeeded")
	}
	if err := e.c.Delete(ctx, "/x", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetFileInfo(ctx, "/x/y/two.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("deleted file still there: %v", err)
	}
	if err := e.c.Upload(ctx); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("empty upload: %v", err)
	}
}

// failingReader fails after some bytes.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestUploadContentError(t *testing.T) {
	fs := newFakeServer("")
	fs.novalidate = true // the request body is cut short on purpose
	e := newEnv(t, fs, toolbox.ClientOptions{HTTPClient: &http.Client{}})
	err := e.c.Upload(ctxT(t), toolbox.UploadFile{Path: "/f", Content: &failingReader{n: 100000}})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Upload with a failing reader: %v", err)
	}
}

func TestSessionExecuteStateless(t *testing.T) {
	e := newEnv(t, newFakeServer(allExt+",stateless"), toolbox.ClientOptions{})
	ctx := ctxT(t)
	if err := e.c.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if ext, err := e.c.Extensions(ctx); err != nil || !ext.Stateless {
		t.Fatalf("Extensions = %+v, %v", ext, err)
	}
	for _, tc := range []struct {
		req  toolbox.SessionExecuteRequest
		opts toolbox.SessionExecOptions
		want string
	}{
		{toolbox.SessionExecuteRequest{Command: "run"}, toolbox.SessionExecOptions{Stateless: true}, "base64,stateless"},
		{toolbox.SessionExecuteRequest{Command: "run", RunAsync: true}, toolbox.SessionExecOptions{Stateless: true}, "stateless"},
		{toolbox.SessionExecuteRequest{Command: "run"}, toolbox.SessionExecOptions{}, "base64"},
		{toolbox.SessionExecuteRequest{Command: "run", RunAsync: true}, toolbox.SessionExecOptions{}, ""},
	} {
		if _, err := e.c.SessionExecuteWith(ctx, "s", tc.req, tc.opts); err != nil {
			t.Fatal(err)
		}
		reqs := e.fs.requests()
		if got := reqs[len(reqs)-1].Header.Get(toolbox.HeaderUseExtensions); got != tc.want {
			t.Errorf("%+v %+v: %s = %q, want %q", tc.req, tc.opts, toolbox.HeaderUseExtensions, got, tc.want)
		}
	}
}
