package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// daytonaMode turns on Options.Daytona.
func daytonaMode(o *Options) { o.Daytona = true }

func TestExplicitNulls(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("n")
	// An async answer: every field but cmdId is null.
	data := e.expect(http.StatusAccepted, "POST", "/process/session/n/exec", toolbox.SessionExecuteRequest{Command: "true", RunAsync: true}, sdk...)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"output", "stdout", "stderr", "exitCode"} {
		if v, ok := fields[k]; !ok || string(v) != "null" {
			t.Errorf("async answer %s: %s = %s, want an explicit null", data, k, v)
		}
	}
	// A sync answer to an old SDK: stdout and stderr are null.
	data = e.expect(http.StatusOK, "POST", "/process/session/n/exec", toolbox.SessionExecuteRequest{Command: "echo hi"})
	fields = nil
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	if string(fields["stdout"]) != "null" || string(fields["stderr"]) != "null" || string(fields["output"]) != `"hi\n"` || string(fields["exitCode"]) != "0" {
		t.Errorf("old-SDK sync answer %s: want output and exitCode, stdout and stderr null", data)
	}
}

func TestUnsupportedRoutes(t *testing.T) {
	e := newErrEnv(t)
	for _, rt := range []struct{ method, path string }{
		{"GET", "/computeruse/status"},
		{"POST", "/computeruse/mouse/click"},
		{"GET", "/computeruse/screenshot"},
		{"POST", "/lsp/start"},
		{"GET", "/lsp/document-symbols"},
	} {
		er := e.expectError(http.StatusNotImplemented, "", rt.method, rt.path, nil)
		if !strings.Contains(er.Message, "not supported by this server") {
			t.Errorf("%s %s: message %q does not say it is not supported", rt.method, rt.path, er.Message)
		}
	}
}

func TestDaytonaModeNoExtensions(t *testing.T) {
	e := newEnv(t, true, daytonaMode)
	e.createSession("x")
	// Asking for extensions changes nothing: base64 is not applied, and
	// input gets its newline (expect checks that none is advertised).
	r := e.execSync("x", "printf out", toolbox.HeaderUseExtensions, toolbox.ExtBase64+","+toolbox.ExtBinary)
	if r.Stdout == nil || *r.Stdout != "out\n" {
		t.Errorf("stdout %v, want Daytona's plain, newline-terminated text", r.Stdout)
	}
}

func TestDaytonaModeOutput(t *testing.T) {
	e := newEnv(t, true, daytonaMode)
	e.createSession("o")
	// NULs are dropped; a last line without a newline gets one, per
	// stream.
	r := e.execSync("o", `printf 'a\0b\nc'; printf 'e\0rr' >&2`)
	if *r.Stdout != "ab\nc\n" || *r.Stderr != "err\n" {
		t.Errorf("stdout %q stderr %q, want %q and %q", *r.Stdout, *r.Stderr, "ab\nc\n", "err\n")
	}
	// Input gets a newline too, and is echoed (no suppressInputEcho).
	cid := e.execAsync("o", toolbox.SessionExecuteRequest{Command: `read l; echo "got:$l"`, RunAsync: true})
	waitInput(t, e, "o", cid, "x")
	e.waitExit("o", cid)
	data := e.expect(http.StatusOK, "GET", "/process/session/o/command/"+cid+"/logs", nil, sdk...)
	var l toolbox.SessionCommandLogsResponse
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	if l.Stdout != "x\ngot:x\n" {
		t.Errorf("stdout %q, want the echo and the answer", l.Stdout)
	}
}

// waitInput sends data to an async command, retrying while its input
// pipe does not exist yet.
func waitInput(t *testing.T, e *testEnv, sid, cid, data string) {
	t.Helper()
	path := "/process/session/" + sid + "/command/" + cid + "/input"
	for {
		resp, body := e.do("POST", path, toolbox.SessionSendInputRequest{Data: data})
		if resp.StatusCode == http.StatusNoContent {
			return
		}
		var er toolbox.ErrorResponse
		_ = json.Unmarshal(body, &er)
		if resp.StatusCode != http.StatusInternalServerError || !strings.HasSuffix(er.Message, daytonaNoInputPipe) {
			t.Fatalf("input: %d %s, want 204 or 500 %q", resp.StatusCode, body, daytonaNoInputPipe)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Input is refused until daytonaPipeDelay after the command started (and
// while it waits for its turn), only in the Daytona mode and only for
// async commands.
func TestDaytonaModeInputPipe(t *testing.T) {
	normal, daytona := &Server{}, &Server{daytona: true}
	now := time.Now()
	for _, tc := range []struct {
		srv     *Server
		c       *command
		refused bool
	}{
		{daytona, &command{async: true}, true},                                         // queued
		{daytona, &command{async: true, startedAt: now.Add(time.Minute)}, true},        // just started (a start time ahead: however slow this test runs, it stays within the delay)
		{daytona, &command{async: true, startedAt: now.Add(-daytonaPipeDelay)}, false}, // the pipe exists
		{daytona, &command{async: false}, false},                                       // sync: input is refused otherwise
		{normal, &command{async: true, startedAt: now}, false},                         // agentbox's server queues the input
		{normal, &command{async: true}, false},
	} {
		err := tc.srv.inputRefused(tc.c)
		if (err != nil) != tc.refused {
			t.Errorf("daytona=%v async=%v started %v ago: refused = %v, want %v", tc.srv.daytona, tc.c.async, time.Since(tc.c.startedAt), err, tc.refused)
		}
		if err == nil {
			continue
		}
		if he := asHTTPError(err); he.status != http.StatusInternalServerError || he.msg != daytonaNoInputPipe {
			t.Errorf("refusal %d %q, want 500 %q", he.status, he.msg, daytonaNoInputPipe)
		}
	}
}

func TestDaytonaModeErrors(t *testing.T) {
	e := newEnv(t, true, daytonaMode)
	er := e.expectError(http.StatusInternalServerError, codeInternal, "POST", "/process/session/nope/exec", toolbox.SessionExecuteRequest{Command: "true"})
	if !strings.HasSuffix(er.Message, daytonaNoSession) {
		t.Errorf("exec in an unknown session: %q", er.Message)
	}
	// Elsewhere an unknown session is still 404.
	e.expectError(http.StatusNotFound, codeNotFound, "GET", "/process/session/nope", nil)
}

func TestDaytonaModeExitKillsSession(t *testing.T) {
	e := newEnv(t, true, daytonaMode)
	e.createSession("d")
	// A command that returns leaves the shell alive, whatever its code.
	if r := e.execSync("d", "false"); *r.ExitCode != 1 {
		t.Fatalf("false: exit %d", *r.ExitCode)
	}
	if r := e.execSync("d", "(exit 4)"); *r.ExitCode != 4 {
		t.Fatalf("(exit 4): exit %d", *r.ExitCode)
	}
	cid := e.execAsync("d", toolbox.SessionExecuteRequest{Command: "echo bye; exit 3", RunAsync: true})
	ss, err := e.srv.session("d")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ss.shellDead() {
		if time.Now().After(deadline) {
			t.Fatal("the session's shell did not die on exit 3")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The command never reports an exit code; the next exec fails.
	if c := e.command("d", cid); c.ExitCode != nil {
		t.Errorf("the command that killed the shell reports exit code %d", *c.ExitCode)
	}
	er := e.expectError(http.StatusInternalServerError, codeInternal, "POST", "/process/session/d/exec", toolbox.SessionExecuteRequest{Command: "true"})
	if !strings.HasSuffix(er.Message, daytonaDeadSession) {
		t.Errorf("exec in a dead session: %q", er.Message)
	}
	// A follower sees the output and waits; deleting the session ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _ := e.raw.dial(ctx, "d", cid, true, http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}})
	typ, msg, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || string(msg) != toolbox.StdoutMarker+"bye\n" {
		t.Fatalf("follow: %v %q %v", typ, msg, err)
	}
	e.expect(http.StatusNoContent, "DELETE", "/process/session/d", nil)
	if _, ce := readAll(ctx, t, conn); ce.Code != websocket.StatusNormalClosure {
		t.Errorf("follow after delete: close %v", ce)
	}
}

func TestDaytonaModeCloseTail(t *testing.T) {
	for _, daytona := range []bool{false, true} {
		t.Run(map[bool]string{false: "normal", true: "daytona"}[daytona], func(t *testing.T) {
			e := newEnv(t, true, func(o *Options) { o.Daytona = daytona })
			e.createSession("f")
			cid := e.execAsync("f", toolbox.SessionExecuteRequest{Command: "printf x", RunAsync: true})
			code := e.waitExit("f", cid)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			conn, _ := e.raw.dial(ctx, "f", cid, true, http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}})
			msgs, ce := readAll(ctx, t, conn)
			took := time.Since(start)
			want := "x"
			if daytona {
				want = "x\n"
			}
			var raw []byte
			for _, m := range msgs {
				raw = append(raw, m...)
			}
			if stdout, stderr := demux(raw); string(stdout) != want || len(stderr) != 0 || ce.Code != websocket.StatusNormalClosure || code != 0 {
				t.Fatalf("follow: %q close %v exit %d", msgs, ce, code)
			}
			// Daytona's socket lingers a second after the end; ours closes
			// at once (asserted only as a lower bound for Daytona's).
			if daytona && took < daytonaCloseTail {
				t.Errorf("the Daytona follow closed %v after the end, want at least %v", took, daytonaCloseTail)
			}
		})
	}
}
