package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// ptyConn is a test client of a PTY WebSocket.
type ptyConn struct {
	t    *testing.T
	conn *websocket.Conn
	out  bytes.Buffer
}

// connectPty dials a PTY session's WebSocket and checks the "connected"
// control message.
func (e *testEnv) connectPty(ctx context.Context, t *testing.T, id string) *ptyConn {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, "ws://sandbox/process/pty/"+id+"/connect", &websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	typ, data, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("first message: %v %v %q", typ, err, data)
	}
	var m toolbox.PtyControl
	if err := json.Unmarshal(data, &m); err != nil || m.Type != "control" || m.Status != "connected" {
		t.Fatalf("first message %q, want the connected control message", data)
	}
	return &ptyConn{t: t, conn: conn}
}

// send writes input.
func (p *ptyConn) send(ctx context.Context, s string) {
	p.t.Helper()
	if err := p.conn.Write(ctx, websocket.MessageBinary, []byte(s)); err != nil {
		p.t.Fatalf("sending %q: %v", s, err)
	}
}

// waitFor reads output until it holds want.
func (p *ptyConn) waitFor(ctx context.Context, want string) {
	p.t.Helper()
	for !strings.Contains(p.out.String(), want) {
		typ, data, err := p.conn.Read(ctx)
		if err != nil {
			p.t.Fatalf("waiting for %q: %v; output so far %q", want, err, p.out.String())
		}
		if typ != websocket.MessageBinary {
			p.t.Fatalf("got a %v message %q, want binary output", typ, data)
		}
		p.out.Write(data)
	}
}

// waitClose reads output until the server closes, and returns the close.
func (p *ptyConn) waitClose(ctx context.Context) websocket.CloseError {
	p.t.Helper()
	for {
		_, data, err := p.conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				p.t.Fatalf("waiting for the close: %v; output %q", err, p.out.String())
			}
			return ce
		}
		p.out.Write(data)
	}
}

// expectExit checks the close of a process that exited with code.
func expectExit(t *testing.T, ce websocket.CloseError, code int) {
	t.Helper()
	want := websocket.StatusNormalClosure
	if code != 0 {
		want = websocket.StatusInternalError
	}
	e, ok := toolbox.ParsePtyExit(ce.Reason)
	if ce.Code != want || !ok || e.ExitCode != code {
		t.Fatalf("close %v %q, want %v with exit code %d", ce.Code, ce.Reason, want, code)
	}
}

func (e *testEnv) ptyInfo(id string) toolbox.PtySessionInfo {
	e.t.Helper()
	var info toolbox.PtySessionInfo
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/process/pty/"+id, nil), &info); err != nil {
		e.t.Fatal(err)
	}
	return info
}

// newPtyEnv starts a server (its traffic checked against the spec, with
// mod's options) and returns it with a context bounding the test.
func newPtyEnv(t *testing.T, mod ...func(*Options)) (*testEnv, context.Context) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return newEnv(t, true, mod...), ctx
}

// TestPtyShell drives an interactive shell through every route, each
// exchange checked against the spec: create, list, get, connect, input and
// output, resize seen by the program, exit code, delete.
func TestPtyShell(t *testing.T) {
	e, ctx := newPtyEnv(t)
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "p1", Cols: 90, Rows: 20, Envs: map[string]string{"GREETING": "hi"}})
	var list toolbox.PtyListResponse
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/process/pty", nil), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "p1" || !list.Sessions[0].Active {
		t.Fatalf("list %+v", list)
	}
	info := e.ptyInfo("p1")
	if info.Cols != 90 || info.Rows != 20 || info.Cwd != e.work || info.Envs["TERM"] != ptyDefaultTerm || info.Envs["GREETING"] != "hi" || info.ExitCode != nil {
		t.Fatalf("info %+v", info)
	}
	p := e.connectPty(ctx, t, "p1")
	p.send(ctx, "stty size; echo $GREETING-$((6*7)); tty\n")
	p.waitFor(ctx, "20 90")
	p.waitFor(ctx, "hi-42")
	p.waitFor(ctx, "/dev/pts/")

	var resized toolbox.PtySessionInfo
	if err := json.Unmarshal(e.expect(http.StatusOK, "POST", "/process/pty/p1/resize", toolbox.PtyResizeRequest{Cols: 120, Rows: 33}), &resized); err != nil {
		t.Fatal(err)
	}
	if resized.Cols != 120 || resized.Rows != 33 {
		t.Fatalf("resize answered %+v", resized)
	}
	p.send(ctx, "stty size\n")
	p.waitFor(ctx, "33 120")

	p.send(ctx, "exit 3\n")
	expectExit(t, p.waitClose(ctx), 3)
	info = e.ptyInfo("p1")
	if info.Active || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Fatalf("after exit: %+v", info)
	}
	e.expect(http.StatusOK, "DELETE", "/process/pty/p1", nil)
	e.expect(http.StatusNotFound, "GET", "/process/pty/p1", nil)
}

// TestPtyLazyStart: a lazy session starts with its first client, which
// sees everything; one that is not lazy keeps its output until a client
// connects.
func TestPtyLazyStart(t *testing.T) {
	e, ctx := newPtyEnv(t)
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "lazy", LazyStart: true, Command: "echo started-$((1+1)); read x; exit $x"}, toolbox.HeaderUseExtensions, toolbox.ExtPtyCommand)
	if info := e.ptyInfo("lazy"); info.Active || !info.LazyStart {
		t.Fatalf("lazy session before connect: %+v", info)
	}
	e.expect(http.StatusOK, "POST", "/process/pty/lazy/resize", toolbox.PtyResizeRequest{Cols: 10, Rows: 5})
	p := e.connectPty(ctx, t, "lazy")
	p.waitFor(ctx, "started-2")
	if info := e.ptyInfo("lazy"); !info.Active || info.Cols != 10 {
		t.Fatalf("lazy session after connect: %+v", info)
	}
	p.send(ctx, "0\n")
	expectExit(t, p.waitClose(ctx), 0)

	// Output before the first client waits for it.
	marker := filepath.Join(e.work, "ran")
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "eager", Command: "echo early-$((2+3)); touch " + marker + "; read x"})
	waitFile(t, marker)
	p = e.connectPty(ctx, t, "eager")
	p.waitFor(ctx, "early-5")
	// A second client sees what comes next; both see the exit.
	q := e.connectPty(ctx, t, "eager")
	p.send(ctx, "\n")
	expectExit(t, p.waitClose(ctx), 0)
	expectExit(t, q.waitClose(ctx), 0)
	// A client of an ended session learns the exit code.
	conn, _, err := websocket.Dial(ctx, "ws://sandbox/process/pty/eager/connect", &websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if typ, data, err := conn.Read(ctx); err != nil || typ != websocket.MessageText || !strings.Contains(string(data), `"status":"error"`) {
		t.Fatalf("connect to an ended session: %v %v %q", typ, err, data)
	}
	_, _, err = conn.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("after the error message: %v", err)
	}
	expectExit(t, ce, 0)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}

// TestPtyCtrlC: ^C interrupts the foreground job, not the shell.
func TestPtyCtrlC(t *testing.T) {
	e, ctx := newPtyEnv(t)
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "c"})
	p := e.connectPty(ctx, t, "c")
	// The job says it runs once it is in the foreground: a ^C before that
	// would race with bash starting the job.
	p.send(ctx, "sh -c 'echo go-$((1+2)); exec sleep 100'\n")
	p.waitFor(ctx, "go-3")
	p.send(ctx, "\x03")
	p.send(ctx, "echo alive-$((4+4))\n")
	p.waitFor(ctx, "alive-8")
	p.send(ctx, "exit\n")
	expectExit(t, p.waitClose(ctx), 0)
}

// TestPtyDeleteKills: deleting a session, and closing the server, kills
// its shell and every process it started, background jobs and daemons in
// their own sessions included, and its clients learn exit code 137.
func TestPtyDeleteKills(t *testing.T) {
	for _, how := range []string{"delete", "close"} {
		t.Run(how, func(t *testing.T) {
			e, ctx := newPtyEnv(t)
			pids := filepath.Join(e.work, "pids")
			e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "k"})
			ps, err := e.srv.pty("k")
			if err != nil {
				t.Fatal(err)
			}
			p := e.connectPty(ctx, t, "k")
			p.send(ctx, "sleep 100 & setsid sleep 101 & echo $$ $! >> "+pids+"; sleep 102\n")
			got := readPids(t, pids, 2)
			if how == "delete" {
				e.expect(http.StatusOK, "DELETE", "/process/pty/k", nil)
			} else if err := e.srv.Close(); err != nil {
				t.Fatal(err)
			}
			expectExit(t, p.waitClose(ctx), 137)
			for _, pid := range got {
				if pidAlive(pid) {
					t.Errorf("pid %d survived", pid)
				}
			}
			if procs := findProcs(nil, markerKey+"="+ps.token); len(procs) > 0 {
				t.Errorf("tagged processes left: %v", procs)
			}
		})
	}
}

// TestPtyBadInput: malformed requests and unknown ids.
func TestPtyBadInput(t *testing.T) {
	e := newErrEnv(t)
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty", toolbox.PtyCreateRequest{})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "a/b"})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x", Cols: 1001})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x", Rows: -1})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x", Cwd: "/no/such/dir"})
	e.expectError(http.StatusBadRequest, codeInvalidRequestBody, "POST", "/process/pty", []byte("{"))
	for _, m := range []string{"GET", "DELETE"} {
		e.expectError(http.StatusNotFound, codeNotFound, m, "/process/pty/nope", nil)
	}
	e.expectError(http.StatusNotFound, codeNotFound, "POST", "/process/pty/nope/resize", toolbox.PtyResizeRequest{Cols: 10, Rows: 10})
	e.expectError(http.StatusNotFound, codeNotFound, "GET", "/process/pty/nope/connect", nil)

	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x", Command: "exit 4"})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty/x/resize", toolbox.PtyResizeRequest{Cols: 0, Rows: 10})
	e.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/pty/x/resize", toolbox.PtyResizeRequest{Cols: 10, Rows: 1001})
	// Ended: the exit code stays, resizing is gone, the id can be used again.
	deadline := time.Now().Add(10 * time.Second)
	for e.ptyInfo("x").ExitCode == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if code := e.ptyInfo("x").ExitCode; code == nil || *code != 4 {
		t.Fatalf("exit code %v, want 4", code)
	}
	e.expectError(http.StatusGone, codeGone, "POST", "/process/pty/x/resize", toolbox.PtyResizeRequest{Cols: 10, Rows: 10})
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x", LazyStart: true})
	e.expectError(http.StatusConflict, codeConflict, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "x"})
}

// TestPtyLeftovers: the session ends when its shell exits, even though a
// process it left behind holds the terminal; deleting the session kills
// that process.
func TestPtyLeftovers(t *testing.T) {
	e, ctx := newPtyEnv(t)
	pids := filepath.Join(e.work, "pids")
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "l", LazyStart: true, Command: "nohup sleep 100 >/dev/tty 2>&1 & echo $! > " + pids + "; exit 5"})
	p := e.connectPty(ctx, t, "l")
	expectExit(t, p.waitClose(ctx), 5)
	pid := readPids(t, pids, 1)[0]
	e.expect(http.StatusOK, "DELETE", "/process/pty/l", nil)
	if pidAlive(pid) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		t.Errorf("pid %d survived the delete: %s %q", pid, st, env)
	}
}

// TestPtyDropCapabilities: a PTY session's shell starts through the
// server's starter, so DropCapabilities confines it as it does commands.
func TestPtyDropCapabilities(t *testing.T) {
	testenv.NeedRoot(t, "needs root: an unprivileged process has no capabilities to drop")
	e, ctx := newPtyEnv(t, func(o *Options) { o.DropCapabilities = true })
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "caps", LazyStart: true,
		Command: "grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\\t ' ' ' | tr '\\n' ';'"})
	p := e.connectPty(ctx, t, "caps")
	expectExit(t, p.waitClose(ctx), 0)
	if want := "CapEff: 0000000000000000;CapBnd: 0000000000000000;NoNewPrivs: 1;"; !strings.Contains(p.out.String(), want) {
		t.Fatalf("PTY shell status %q, want %q", p.out.String(), want)
	}
}

// TestPtyCreateConnect: GET /process/pty/create-connect, as newer Daytona
// SDKs use it (not in the spec files: no validation): the environment in
// a subprotocol, the first offered subprotocol agreed to, the "exited"
// control message before the exit close for a client that asked for it.
func TestPtyCreateConnect(t *testing.T) {
	e, ctx := newPtyEnv(t)
	envs := "X-Daytona-Pty-Envs~" + base64.RawURLEncoding.EncodeToString([]byte(`{"FOO":"bar"}`))
	protos := []string{envs, toolbox.PtyExitControlSubprotocol}
	conn, _, err := websocket.Dial(ctx, "ws://sandbox/process/pty/create-connect?id=cc&cols=70&rows=20", &websocket.DialOptions{HTTPClient: e.raw.client, Subprotocols: protos})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != envs {
		t.Errorf("agreed subprotocol %q, want the first offered", conn.Subprotocol())
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("echo $FOO-$((1+1)); stty size; exit 4\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var controls []toolbox.PtyControl
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatal(err)
			}
			expectExit(t, ce, 4)
			break
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
			continue
		}
		var m toolbox.PtyControl
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("text message %q", data)
		}
		controls = append(controls, m)
	}
	if !strings.Contains(out.String(), "bar-2") || !strings.Contains(out.String(), "20 70") {
		t.Errorf("output %q, want bar-2 and 20 70", out.String())
	}
	if len(controls) != 2 || controls[0].Status != "connected" || controls[1].Status != "exited" ||
		controls[1].ExitCode == nil || *controls[1].ExitCode != 4 || controls[1].ExitReason != "non-zero exit" {
		t.Errorf("control messages %+v, want connected then exited with 4", controls)
	}

	// Bad input, before the upgrade.
	e.raw.expectError(http.StatusBadRequest, codeBadRequest, "GET", "/process/pty/create-connect?cols=10", nil)
	e.raw.expectError(http.StatusBadRequest, codeBadRequest, "GET", "/process/pty/create-connect?id=x&rows=many", nil)
	e.raw.expectError(http.StatusBadRequest, codeBadRequest, "GET", "/process/pty/create-connect?id=x", nil, "Sec-WebSocket-Protocol", "X-Daytona-Pty-Envs~%%%")
	e.expect(http.StatusCreated, "POST", "/process/pty", toolbox.PtyCreateRequest{ID: "taken", LazyStart: true})
	e.raw.expectError(http.StatusConflict, codeConflict, "GET", "/process/pty/create-connect?id=taken", nil)
	// A request that is no WebSocket creates nothing that stays.
	e.raw.expect(http.StatusUpgradeRequired, "GET", "/process/pty/create-connect?id=plain", nil)
	e.expect(http.StatusNotFound, "GET", "/process/pty/plain", nil)
}
