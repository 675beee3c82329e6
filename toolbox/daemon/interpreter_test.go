package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// interpClient returns a toolbox client for e (validated when e is).
func interpClient(t *testing.T, e *testEnv) *toolbox.Client {
	t.Helper()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: baseURL, HTTPClient: e.client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func runCode(t *testing.T, c *toolbox.Client, ctxID, code string) *toolbox.ExecutionResult {
	t.Helper()
	res, err := c.RunCode(t.Context(), toolbox.InterpreterExecuteRequest{Code: code, ContextID: ctxID}, nil)
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	return res
}

func TestInterpreterContexts(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	c := interpClient(t, e)
	ctx := t.Context()
	if err := os.Mkdir(filepath.Join(e.work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ic, err := c.CreateContext(ctx, toolbox.CreateContextRequest{Cwd: "sub", Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	if ic.ID == "" || ic.Cwd != filepath.Join(e.work, "sub") || ic.Language != "python" || !ic.Active {
		t.Errorf("created %+v", ic)
	}
	if _, err := time.Parse(time.RFC3339Nano, ic.CreatedAt); err != nil {
		t.Errorf("createdAt: %v", err)
	}
	// The default context (made by an execution) is not listed.
	if r := runCode(t, c, "", "import os\nprint(os.getcwd())"); r.Stdout != e.work+"\n" {
		t.Errorf("default context cwd: %+v", r)
	}
	if r := runCode(t, c, ic.ID, "import os\nprint(os.getcwd())"); r.Stdout != ic.Cwd+"\n" {
		t.Errorf("context cwd: %+v", r)
	}
	list, err := c.ListContexts(ctx)
	if err != nil || len(list) != 1 || list[0].ID != ic.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.DeleteContext(ctx, ic.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListContexts(ctx); err != nil || len(list) != 0 {
		t.Errorf("list after delete: %+v %v", list, err)
	}
	bad := newErrEnv(t)
	bad.expectError(http.StatusNotFound, codeNotFound, "DELETE", "/process/interpreter/context/"+ic.ID, nil)
	bad.expectError(http.StatusBadRequest, codeBadRequest, "DELETE", "/process/interpreter/context/default", nil)
	bad.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/interpreter/context", toolbox.CreateContextRequest{Language: "javascript"})
	bad.expectError(http.StatusBadRequest, codeBadRequest, "POST", "/process/interpreter/context", toolbox.CreateContextRequest{Cwd: "missing"})
	bad.expectError(http.StatusBadRequest, codeInvalidRequestBody, "POST", "/process/interpreter/context", []byte("["))
}

func TestInterpreterExecute(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	c := interpClient(t, e)
	// Variables, imports and functions last between executions.
	if r := runCode(t, c, "", "import math\nx = 10\ndef f(): return x * 2"); r.Stdout != "" || r.Stderr != "" || r.Error != nil || r.Result != "" {
		t.Errorf("definitions: %+v", r)
	}
	if r := runCode(t, c, "", "print(x, f(), math.floor(2.5))"); r.Stdout != "10 20 2\n" {
		t.Errorf("state: %+v", r)
	}
	// A final expression's value is the result.
	if r := runCode(t, c, "", "1+1"); r.Result != "2" || r.Stdout != "" {
		t.Errorf("1+1: %+v", r)
	}
	// Exceptions: stderr stays what the code wrote, the error is apart.
	r := runCode(t, c, "", "import sys\nsys.stderr.write('ci-stderr\\n')\nraise ValueError('boom')")
	if r.Stderr != "ci-stderr\n" || r.Error == nil || r.Error.Name != "ValueError" || r.Error.Value != "boom" ||
		!strings.Contains(r.Error.Traceback, "ValueError: boom") || !strings.Contains(r.Error.Traceback, "line 3") ||
		strings.Contains(r.Error.Traceback, "interpreter_worker") {
		t.Errorf("exception: %+v %+v", r, r.Error)
	}
	if r := runCode(t, c, "", "def g(:"); r.Error == nil || r.Error.Name != "SyntaxError" {
		t.Errorf("syntax error: %+v", r)
	}
	// Output without a newline, bytes that are not UTF-8, a character
	// split across writes.
	r = runCode(t, c, "", "import sys\nprint('a', end='')\nsys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff ok \\xc3')\nsys.stdout.buffer.flush()\nsys.stdout.buffer.write(b'\\xa9')")
	if r.Stdout != "a\ufffd ok \u00e9" {
		t.Errorf("partial and binary output: %q", r.Stdout)
	}
	// Large output arrives whole.
	r = runCode(t, c, "", "import sys\nfor i in range(20000):\n    sys.stdout.write('%06d ' % i + 'x' * 90 + '\\n')")
	if len(r.Stdout) != 20000*98 || !strings.HasPrefix(r.Stdout, "000000 ") || !strings.HasSuffix(r.Stdout, "x\n") {
		t.Errorf("large output: %d bytes", len(r.Stdout))
	}
	// Code that reads stdin sees end of file rather than hanging.
	if r := runCode(t, c, "", "input('name? ')"); r.Error == nil || r.Error.Name != "EOFError" {
		t.Errorf("stdin: %+v", r)
	}
	// envs apply to one execution.
	res, err := c.RunCode(t.Context(), toolbox.InterpreterExecuteRequest{Code: "import os\nprint(os.environ['ZZ'])", Envs: map[string]string{"ZZ": "zz"}}, nil)
	if err != nil || res.Stdout != "zz\n" {
		t.Errorf("envs: %+v %v", res, err)
	}
	if r := runCode(t, c, "", "print(os.environ.get('ZZ'))"); r.Stdout != "None\n" {
		t.Errorf("envs after: %+v", r)
	}
	// Another context has its own namespace.
	ic, err := c.CreateContext(t.Context(), toolbox.CreateContextRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r := runCode(t, c, ic.ID, "x"); r.Error == nil || r.Error.Name != "NameError" {
		t.Errorf("isolation: %+v", r)
	}
	// An interpreter that exits loses the state; the next execution has a
	// new one.
	if r := runCode(t, c, ic.ID, "y = 1\nimport os\nos._exit(3)"); r.Error == nil || r.Error.Name != "InterpreterExited" || !strings.Contains(r.Error.Value, "exit status 3") {
		t.Errorf("exit: %+v", r)
	}
	if r := runCode(t, c, ic.ID, "print('y' in globals())"); r.Stdout != "False\n" {
		t.Errorf("after exit: %+v", r)
	}
}

// TestInterpreterTimeout: code that outlives its timeout is interrupted
// and the context keeps its variables.
func TestInterpreterTimeout(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	c := interpClient(t, e)
	runCode(t, c, "", "kept = 42")
	one := 1
	var msgs []toolbox.InterpreterMessage
	res, err := c.RunCode(t.Context(), toolbox.InterpreterExecuteRequest{
		Code: "import time\nprint('start', flush=True)\ntime.sleep(60)\nprint('never')", Timeout: &one,
	}, func(m toolbox.InterpreterMessage) { msgs = append(msgs, m) })
	if !errors.Is(err, toolbox.ErrExecutionTimeout) {
		t.Fatalf("err %v, want ErrExecutionTimeout", err)
	}
	// The timer may fire before a slow machine's worker printed "start";
	// what it must never print is what follows the sleep.
	if (res.Stdout != "start\n" && res.Stdout != "") || res.Error != nil {
		t.Errorf("result %+v", res)
	}
	if last := msgs[len(msgs)-1]; last.Type != toolbox.InterpreterControl || last.Text != toolbox.ControlInterrupted {
		t.Errorf("last message %+v, want control interrupted", last)
	}
	if r := runCode(t, c, "", "print(kept)"); r.Stdout != "42\n" {
		t.Errorf("state after the timeout: %+v", r)
	}
}

// dialExecute opens the execute WebSocket as a Daytona SDK does and sends
// the request.
func dialExecute(t *testing.T, e *testEnv, query string, req any) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.Dial(t.Context(), "ws://sandbox/process/interpreter/execute"+query, &websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	b, _ := json.Marshal(req)
	if err := conn.Write(t.Context(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	return conn
}

// joinOutput joins consecutive stdout (or stderr) messages: the server
// sends output as it is written, print's text and its newline apart.
func joinOutput(msgs []toolbox.InterpreterMessage) []toolbox.InterpreterMessage {
	var out []toolbox.InterpreterMessage
	for _, m := range msgs {
		if n := len(out); n > 0 && (m.Type == toolbox.InterpreterStdout || m.Type == toolbox.InterpreterStderr) && out[n-1].Type == m.Type {
			out[n-1].Text += m.Text
			continue
		}
		out = append(out, m)
	}
	return out
}

// readMessages reads until the close and returns the messages and close.
func readMessages(t *testing.T, conn *websocket.Conn) ([]toolbox.InterpreterMessage, websocket.CloseError) {
	t.Helper()
	var msgs []toolbox.InterpreterMessage
	for {
		typ, data, err := conn.Read(t.Context())
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v", err)
			}
			return msgs, ce
		}
		var m toolbox.InterpreterMessage
		if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil {
			t.Fatalf("message %v %q is not a JSON text message", typ, data)
		}
		msgs = append(msgs, m)
	}
}

// TestInterpreterWebSocket checks the wire: Daytona's message types, the
// control message and the close codes.
func TestInterpreterWebSocket(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	conn := dialExecute(t, e, "", map[string]any{"code": "print('hi')\n6*7"})
	msgs, ce := readMessages(t, conn)
	msgs = joinOutput(msgs)
	want := []toolbox.InterpreterMessage{{Type: "stdout", Text: "hi\n"}, {Type: "result", Text: "42"}, {Type: "control", Text: "completed"}}
	if ce.Code != websocket.StatusNormalClosure || len(msgs) != len(want) {
		t.Fatalf("messages %+v close %v, want %+v and 1000", msgs, ce, want)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Errorf("message %d: %+v, want %+v", i, msgs[i], want[i])
		}
	}
	conn = dialExecute(t, e, "", map[string]any{"code": "import time; time.sleep(30)", "timeout": 1})
	msgs, ce = readMessages(t, conn)
	if ce.Code != toolbox.CloseInterpreterTimeout || len(msgs) != 1 || msgs[0].Text != toolbox.ControlInterrupted {
		t.Errorf("timeout: %+v %v", msgs, ce)
	}
	// An unknown context named in the message: close 4004.
	conn = dialExecute(t, e, "", map[string]any{"code": "1", "contextId": "nope"})
	if msgs, ce = readMessages(t, conn); ce.Code != toolbox.CloseInterpreterNotFound || len(msgs) != 0 || !strings.Contains(ce.Reason, "nope") {
		t.Errorf("unknown context: %+v %v", msgs, ce)
	}
	conn = dialExecute(t, e, "", map[string]any{"code": " "})
	if _, ce = readMessages(t, conn); ce.Code != toolbox.CloseInterpreterBadRequest {
		t.Errorf("blank code: %v", ce)
	}
	conn = dialExecute(t, e, "", "not an object")
	if _, ce = readMessages(t, conn); ce.Code != toolbox.CloseInterpreterBadRequest {
		t.Errorf("bad request: %v", ce)
	}
}

// TestInterpreterUnknownContext: named in the query (as our client does),
// an unknown context is a 404 before the upgrade.
func TestInterpreterUnknownContext(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newErrEnv(t)
	c := interpClient(t, e)
	_, err := c.RunCode(t.Context(), toolbox.InterpreterExecuteRequest{Code: "1", ContextID: "nope"}, nil)
	var ae *toolbox.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || !strings.Contains(ae.Message, "nope") {
		t.Fatalf("err %v, want a 404 naming the context", err)
	}
	e.expectError(http.StatusNotFound, codeNotFound, "GET", "/process/interpreter/execute?contextId=nope", nil)
	e.expectError(http.StatusBadRequest, codeBadRequest, "GET", "/process/interpreter/execute", nil)
}

// TestInterpreterClientGone: a client that leaves mid-execution has its
// code interrupted; the context serves the next one.
func TestInterpreterClientGone(t *testing.T) {
	testenv.NeedTool(t, "python3", "python3")
	e := newEnv(t, true)
	c := interpClient(t, e)
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	var once sync.Once
	go func() {
		<-started
		cancel()
	}()
	_, err := c.RunCode(ctx, toolbox.InterpreterExecuteRequest{Code: "import time\nprint('go', flush=True)\nwhile True: time.sleep(1)"},
		func(m toolbox.InterpreterMessage) {
			if m.Type == toolbox.InterpreterStdout {
				once.Do(func() { close(started) })
			}
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if r := runCode(t, c, "", "print('next')"); r.Stdout != "next\n" {
		t.Errorf("next: %+v", r)
	}
}
