package daemon

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/toolbox"
)

func TestInfoEndpoints(t *testing.T) {
	e := newEnv(t, true, func(o *Options) { o.HomeDir = "/home/daytona"; o.Version = "v1.2.3" })
	var v toolbox.VersionResponse
	json.Unmarshal(e.expect(200, "GET", "/version", nil), &v)
	if v.Version != "v1.2.3" {
		t.Errorf("version %q", v.Version)
	}
	var d toolbox.DirResponse
	json.Unmarshal(e.expect(200, "GET", "/work-dir", nil), &d)
	if d.Dir != e.work {
		t.Errorf("work dir %q, want %q", d.Dir, e.work)
	}
	json.Unmarshal(e.expect(200, "GET", "/user-home-dir", nil), &d)
	if d.Dir != "/home/daytona" {
		t.Errorf("home dir %q", d.Dir)
	}
	// The legacy alias is in no current spec.
	raw := newEnv(t, false, func(o *Options) { o.HomeDir = "/home/daytona" })
	d = toolbox.DirResponse{}
	json.Unmarshal(raw.expect(200, "GET", "/project-dir", nil), &d)
	if d.Dir != "/home/daytona" {
		t.Errorf("project dir %q", d.Dir)
	}
}

func TestUnknownRouteAndBadInput(t *testing.T) {
	e := newErrEnv(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	e.expectError(404, codeNotFound, "GET", "/nope", nil)
	e.expectError(404, codeNotFound, "PUT", "/version", nil)
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/execute", []byte(`{"command":`))
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/execute", []byte(``))
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/execute", []byte(`{"command":"true"} x`))
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/execute", []byte(`{"command":1}`))
	e.expectError(400, codeBadRequest, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "  \n"})
	big := `{"command":"echo ` + strings.Repeat("a", 2000) + `"}`
	e.expectError(413, codeInvalidRequestBody, "POST", "/process/execute", []byte(big))
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/session", []byte(`[1]`))
	e.expectError(400, codeBadRequest, "POST", "/process/session", toolbox.CreateSessionRequest{SessionID: ""})
	e.expectError(400, codeBadRequest, "POST", "/process/session", toolbox.CreateSessionRequest{SessionID: "entrypoint"})
	e.expectError(400, codeBadRequest, "POST", "/process/session", toolbox.CreateSessionRequest{SessionID: "a/b"})
	er := e.expectError(404, codeNotFound, "GET", "/process/session/missing", nil)
	if !strings.HasPrefix(er.Message, "not found: session") {
		t.Errorf("message %q", er.Message)
	}
	e.expectError(404, codeNotFound, "DELETE", "/process/session/missing", nil)
	e.expectError(404, codeNotFound, "POST", "/process/session/missing/exec", toolbox.SessionExecuteRequest{Command: "true"})
	e.createSession("s")
	e.expectError(409, codeConflict, "POST", "/process/session", toolbox.CreateSessionRequest{SessionID: "s"})
	e.expectError(404, codeNotFound, "GET", "/process/session/s/command/nope", nil)
	e.expectError(404, codeNotFound, "GET", "/process/session/s/command/nope/logs", nil)
	e.expectError(404, codeNotFound, "POST", "/process/session/s/command/nope/input", toolbox.SessionSendInputRequest{Data: "x"})
	e.expectError(400, codeBadRequest, "POST", "/process/session/s/exec", toolbox.SessionExecuteRequest{Command: " "})
	e.expectError(400, codeInvalidRequestBody, "POST", "/process/session/s/exec", []byte(`{`))
}

// Environment variable names that no shell can export are refused, naming
// the variable and the rule; valid names reach the command.
func TestExecuteEnvNames(t *testing.T) {
	e := newErrEnv(t)
	for _, name := range []string{"A-B", "1X", "$(id)", "", "A=B", "A B", "A\x00", "É"} {
		er := e.expectError(400, codeBadRequest, "POST", "/process/execute",
			toolbox.ExecuteRequest{Command: "echo ran", Envs: map[string]string{"OK": "1", name: "v"}})
		if !strings.Contains(er.Message, fmt.Sprintf("%q", name)) || !strings.Contains(er.Message, "[A-Za-z_][A-Za-z0-9_]*") {
			t.Errorf("name %q: message %q does not name the variable and the rule", name, er.Message)
		}
	}
	er := e.expectError(400, codeBadRequest, "POST", "/process/execute",
		toolbox.ExecuteRequest{Command: "true", Envs: map[string]string{"V": "a\x00b"}})
	if !strings.Contains(er.Message, `"V"`) || !strings.Contains(er.Message, "NUL") {
		t.Errorf("NUL value: message %q", er.Message)
	}
	var r toolbox.ExecuteResponse
	json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{
		Command: `printf '%s %s %s' "$_A1" "$a_" "$Z9"`, Envs: map[string]string{"_A1": "x", "a_": "y", "Z9": "z"}}), &r)
	if r.ExitCode != 0 || r.Result != "x y z" {
		t.Errorf("valid names: %+v", r)
	}
}

func TestRecoverMiddleware(t *testing.T) {
	e := newErrEnv(t)
	e.srv.mux.HandleFunc("GET /panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	er := e.expectError(500, codeInternal, "GET", "/panic", nil)
	if !strings.Contains(er.Message, "boom") {
		t.Errorf("message %q", er.Message)
	}
	e.expect(200, "GET", "/version", nil)
}

func TestExecute(t *testing.T) {
	e := newEnv(t, true)
	sub := filepath.Join(e.work, "sub")
	os.Mkdir(sub, 0o755)
	var r toolbox.ExecuteResponse
	data := e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{
		Command: "echo out; echo err >&2\necho $FOO; pwd; exit 7", Cwd: "sub", Envs: map[string]string{"FOO": "bar"}})
	json.Unmarshal(data, &r)
	if r.ExitCode != 7 || r.Result != "out\nerr\nbar\n"+sub+"\n" {
		t.Errorf("got %+v", r)
	}
	// A command reading stdin gets EOF, not the rest of the script.
	json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "cat; echo after"}), &r)
	if r.ExitCode != 0 || r.Result != "after\n" {
		t.Errorf("got %+v", r)
	}
	// Background children holding the output do not block the answer:
	// the child still runs when it comes.
	json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: "sleep 300 & echo $! > bg.pid; echo started"}), &r)
	if r.Result != "started\n" {
		t.Errorf("got %+v", r)
	}
	killRunning(t, readPids(t, filepath.Join(e.work, "bg.pid"), 1)[0])
}

func TestExecuteTimeoutKillsGroup(t *testing.T) {
	e := newEnv(t, true)
	pidFile := filepath.Join(e.work, "pids")
	start := time.Now()
	er := e.expectError(408, codeRequestTimeout, "POST", "/process/execute", toolbox.ExecuteRequest{
		Command: fmt.Sprintf("sleep 300 & echo $! > %s; setsid sleep 301 & echo $! >> %s; wait", pidFile, pidFile), Timeout: 1})
	if !strings.HasPrefix(er.Message, "request timeout:") {
		t.Errorf("message %q", er.Message)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("took %v", d)
	}
	// killTree returns after a bounded time: on a loaded machine a
	// killed process may still be on its way out (300 s of sleep are
	// not).
	for _, pid := range readPids(t, pidFile, 2) {
		waitDead(t, pid, "a process of a command that timed out")
	}
}

func TestSessionPersistsStateAndSurvivesExit(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("s1")
	if r := e.execSync("s1", "export A=1; B=2; cd /tmp"); *r.ExitCode != 0 {
		t.Fatalf("exit %d", *r.ExitCode)
	}
	r := e.execSync("s1", `echo $A $PWD`)
	if *r.Stdout != "1 /tmp\n" {
		t.Errorf("stdout %q", *r.Stdout)
	}
	r = e.execSync("s1", "export C='multi\nline \"q\" $x'; cd /; exit 3")
	if *r.ExitCode != 3 {
		t.Errorf("exit %d, want 3", *r.ExitCode)
	}
	r = e.execSync("s1", `printf '%s|%s|%s' "$A" "$C" "$PWD"`)
	if *r.Stdout != "1|multi\nline \"q\" $x|/" || *r.ExitCode != 0 {
		t.Errorf("after exit: %q exit %d", *r.Stdout, *r.ExitCode)
	}
	r = e.execSync("s1", "set -e; export D=4; false; echo never")
	if *r.ExitCode != 1 || *r.Stdout != "" {
		t.Errorf("set -e: exit %d stdout %q", *r.ExitCode, *r.Stdout)
	}
	r = e.execSync("s1", "set -x; echo $D; unset A\nif then")
	if *r.ExitCode != 2 {
		t.Errorf("syntax error exit %d", *r.ExitCode)
	}
	r = e.execSync("s1", `echo "[$A][$D]"; echo $SHLVL; env | grep -c `+markerKey)
	if *r.Stdout != "[][4]\n1\n1\n" {
		t.Errorf("after syntax error: %q", *r.Stdout)
	}
	r = e.execSync("s1", `kill -9 $$`)
	if *r.ExitCode != 137 {
		t.Errorf("killed: exit %d", *r.ExitCode)
	}
	r = e.execSync("s1", `echo $D; sleep 0.05; echo err >&2`)
	if *r.Stdout != "4\n" || *r.Stderr != "err\n" || (*r.Output != "\x01\x01\x014\n\x02\x02\x02err\n" && *r.Output != "\x02\x02\x02err\n\x01\x01\x014\n") {
		t.Errorf("after kill: %+v", r)
	}
	// Separate sessions do not share state.
	e.createSession("s2")
	if r := e.execSync("s2", `echo "$A$D"; pwd`); *r.Stdout != "\n"+e.work+"\n" {
		t.Errorf("s2: %q", *r.Stdout)
	}
	var ss toolbox.Session
	json.Unmarshal(e.expect(200, "GET", "/process/session/s1", nil), &ss)
	if ss.SessionID != "s1" || len(ss.Commands) != 9 || ss.Commands[1].Command != `echo $A $PWD` || *ss.Commands[2].ExitCode != 3 {
		t.Errorf("session %+v", ss)
	}
	var list []toolbox.Session
	json.Unmarshal(e.expect(200, "GET", "/process/session", nil), &list)
	if len(list) != 2 || list[0].SessionID != "s1" || list[1].SessionID != "s2" {
		t.Errorf("list %+v", list)
	}
}

func TestSessionCommandsRunInOrder(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("q")
	cid := e.execAsync("q", toolbox.SessionExecuteRequest{Command: "sleep 0.3; export X=late", RunAsync: true})
	if c := e.command("q", cid); c.ExitCode != nil || c.Command != "sleep 0.3; export X=late" {
		t.Errorf("running command: %+v", c)
	}
	legacy := e.execAsync("q", toolbox.SessionExecuteRequest{Command: "echo legacy", Async: true})
	r := e.execSync("q", "echo $X")
	if *r.Stdout != "late\n" {
		t.Errorf("sync exec ran before the async one ended: %q", *r.Stdout)
	}
	if code := e.waitExit("q", cid); code != 0 {
		t.Errorf("exit %d", code)
	}
	if code := e.waitExit("q", legacy); code != 0 {
		t.Errorf("legacy async exit %d", code)
	}
}

func TestDeleteSessionKillsEverything(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("k")
	pidFile := filepath.Join(e.work, "pids")
	// A finished command leaves a nohup'ed job and a setsid daemon behind.
	e.execSync("k", fmt.Sprintf("nohup sleep 60 >/dev/null 2>&1 & echo $! > %s; setsid sh -c 'sleep 61 & echo $! >> %s; wait' >/dev/null 2>&1 &", pidFile, pidFile))
	// A running command with grandchildren, one ignoring SIGTERM.
	cid := e.execAsync("k", toolbox.SessionExecuteRequest{Command: fmt.Sprintf("sh -c 'trap \"\" TERM; sleep 62 & echo $! >> %s; wait' & wait", pidFile), RunAsync: true})
	pids := readPids(t, pidFile, 3)
	for _, pid := range pids {
		if !pidAlive(pid) {
			t.Fatalf("pid %d not running before delete", pid)
		}
	}
	ss, _ := e.srv.session("k")
	e.expect(204, "DELETE", "/process/session/k", nil)
	if left := findProcs(nil, markerKey+"="+ss.token+":"); len(left) > 0 {
		t.Errorf("tagged processes left: %v", left)
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("pid %d survived the session delete", pid)
		}
	}
	e.expectError(404, codeNotFound, "GET", "/process/session/k", nil)
	e.expectError(404, codeNotFound, "GET", "/process/session/k/command/"+cid, nil)
	// The id can be reused.
	e.createSession("k")
}

func TestLogsHeaderMatrix(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("m")
	cid := e.execSync("m", "printf out; sleep 0.05; printf err >&2").CmdID
	path := "/process/session/m/command/" + cid + "/logs"
	// Two pipes read by two goroutines: on a loaded machine the streams
	// may be logged in either order.
	raw, rawSwapped := "\x01\x01\x01out\x02\x02\x02err", "\x02\x02\x02err\x01\x01\x01out"
	swapped := map[string]string{raw: rawSwapped, "outerr": "errout"}
	cases := []struct {
		name string
		hdr  []string
		json bool
		want string
	}{
		{"no header", nil, false, "outerr"},
		{"split", []string{toolbox.HeaderSplitOutput, "true"}, false, raw},
		{"old", []string{toolbox.HeaderSDKVersion, "0.26.9"}, false, "outerr"},
		{"old split", []string{toolbox.HeaderSDKVersion, "0.26.0", toolbox.HeaderSplitOutput, "true"}, false, "outerr"},
		{"mid", []string{toolbox.HeaderSDKVersion, "0.27.0"}, false, raw},
		{"mid2", []string{toolbox.HeaderSDKVersion, "v0.166.9"}, false, raw},
		{"new", []string{toolbox.HeaderSDKVersion, "0.167.0"}, true, raw},
		{"current", []string{toolbox.HeaderSDKVersion, toolbox.SDKVersion}, true, raw},
		{"dev", []string{toolbox.HeaderSDKVersion, "0.0.0-dev"}, true, raw},
		{"garbage", []string{toolbox.HeaderSDKVersion, "banana"}, false, "outerr"},
	}
	for _, c := range cases {
		resp, data := e.do("GET", path, nil, c.hdr...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", c.name, resp.StatusCode)
		}
		if c.json {
			var l toolbox.SessionCommandLogsResponse
			if err := json.Unmarshal(data, &l); err != nil {
				t.Fatalf("%s: %v: %s", c.name, err, data)
			}
			if (l.Output != c.want && l.Output != swapped[c.want]) || l.Stdout != "out" || l.Stderr != "err" {
				t.Errorf("%s: %+v", c.name, l)
			}
		} else if (string(data) != c.want && string(data) != swapped[c.want]) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %q (%s), want %q", c.name, data, resp.Header.Get("Content-Type"), c.want)
		}
	}
	// The same rules shape the sync exec answer.
	var r toolbox.SessionExecuteResponse
	json.Unmarshal(e.expect(200, "POST", "/process/session/m/exec", toolbox.SessionExecuteRequest{Command: "printf a; sleep 0.05; printf b >&2"}), &r)
	if (*r.Output != "ab" && *r.Output != "ba") || r.Stdout != nil || r.Stderr != nil {
		t.Errorf("combined exec: %+v", r)
	}
	json.Unmarshal(e.expect(200, "POST", "/process/session/m/exec", toolbox.SessionExecuteRequest{Command: "printf a"}, toolbox.HeaderSplitOutput, "true"), &r)
	if *r.Output != "\x01\x01\x01a" || r.Stdout != nil {
		t.Errorf("split exec: %+v", r)
	}
	// base64 extension: binary-safe stdout and stderr.
	resp, data := e.do("POST", "/process/session/m/exec", toolbox.SessionExecuteRequest{Command: `printf '\001\001\001\377\n'; printf '\002\376' >&2`},
		toolbox.HeaderSDKVersion, toolbox.SDKVersion, toolbox.HeaderUseExtensions, "base64")
	r = toolbox.SessionExecuteResponse{}
	json.Unmarshal(data, &r)
	so, _ := base64.StdEncoding.DecodeString(*r.Stdout)
	se, _ := base64.StdEncoding.DecodeString(*r.Stderr)
	if resp.Header.Get(toolbox.HeaderEncoding) != "base64" || string(so) != "\x01\x01\x01\xff\n" || string(se) != "\x02\xfe" {
		t.Errorf("base64 exec: %q %q %+v", so, se, r)
	}
	resp, data = e.do("GET", "/process/session/m/command/"+r.CmdID+"/logs", nil,
		toolbox.HeaderSDKVersion, toolbox.SDKVersion, toolbox.HeaderUseExtensions, "frames, base64")
	var l toolbox.SessionCommandLogsResponse
	json.Unmarshal(data, &l)
	so, _ = base64.StdEncoding.DecodeString(l.Stdout)
	if resp.Header.Get(toolbox.HeaderEncoding) != "base64" || string(so) != "\x01\x01\x01\xff\n" {
		t.Errorf("base64 logs: %q", so)
	}
}

func TestFollowPushesPartialLines(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("f")
	cid := e.execAsync("f", toolbox.SessionExecuteRequest{Command: `printf "Enter: "; read name; echo "hi $name"; echo oops >&2`, RunAsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := e.dial(ctx, "f", cid, true, http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}})
	defer c.CloseNow()
	// The prompt arrives while the command is still waiting for input.
	var got []byte
	for !strings.Contains(string(got), "Enter: ") {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (got %q)", err, got)
		}
		got = append(got, data...)
	}
	if cm := e.command("f", cid); cm.ExitCode != nil {
		t.Fatal("command ended before input")
	}
	e.expect(204, "POST", "/process/session/f/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "bob"})
	msgs, ce := readAll(ctx, t, c)
	for _, m := range msgs {
		got = append(got, m...)
	}
	if ce.Code != websocket.StatusNormalClosure {
		t.Errorf("close %v", ce)
	}
	stdout, stderr := demux(got)
	if string(stdout) != "Enter: bob\nhi bob\n" || string(stderr) != "oops\n" {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	// A late follower gets everything from byte 0 and an immediate close.
	start := time.Now()
	c2, _ := e.dial(ctx, "f", cid, true, http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}})
	defer c2.CloseNow()
	msgs, ce = readAll(ctx, t, c2)
	var all []byte
	for _, m := range msgs {
		all = append(all, m...)
	}
	if string(all) != string(got) || ce.Code != websocket.StatusNormalClosure || time.Since(start) > time.Second {
		t.Errorf("late follower: %q %v after %v", all, ce, time.Since(start))
	}
	e.expectError(410, codeGone, "POST", "/process/session/f/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "x"})
}

func TestFollowSubprotocolAndCombined(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("p")
	cid := e.execSync("p", "echo a; sleep 0.05; echo b >&2").CmdID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp := e.dial(ctx, "p", cid, true, nil, "X-Daytona-SDK-Version~0.205.1")
	if c.Subprotocol() != "X-Daytona-SDK-Version~0.205.1" || resp.Header.Get(toolbox.HeaderExtensions) != offeredExtensions {
		t.Errorf("subprotocol %q, extensions %q", c.Subprotocol(), resp.Header.Get(toolbox.HeaderExtensions))
	}
	msgs, _ := readAll(ctx, t, c)
	if got := string(concat(msgs)); got != "\x01\x01\x01a\n\x02\x02\x02b\n" && got != "\x02\x02\x02b\n\x01\x01\x01a\n" {
		t.Errorf("raw follow %q", got)
	}
	c.CloseNow()
	// No version: combined mode, markers removed. Without follow: snapshot.
	c, _ = e.dial(ctx, "p", cid, false, nil)
	msgs, _ = readAll(ctx, t, c)
	if got := string(concat(msgs)); got != "a\nb\n" && got != "b\na\n" {
		t.Errorf("combined %q", got)
	}
	c.CloseNow()
}

func concat(msgs [][]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = append(out, m...)
	}
	return out
}

func TestFramesExtension(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("fr")
	cid := e.execAsync("fr", toolbox.SessionExecuteRequest{Command: `printf '\001\001\001x'; printf 'e' >&2; sleep 0.1; exit 5`, RunAsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hdr := http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}, toolbox.HeaderUseExtensions: {"frames"}}
	c, _ := e.dial(ctx, "fr", cid, true, hdr)
	defer c.CloseNow()
	msgs, ce := readAll(ctx, t, c)
	var out, errb []byte
	for _, m := range msgs {
		switch m[0] {
		case 1:
			out = append(out, m[1:]...)
		case 2:
			errb = append(errb, m[1:]...)
		default:
			t.Fatalf("bad stream id %d", m[0])
		}
	}
	if string(out) != "\x01\x01\x01x" || string(errb) != "e" {
		t.Errorf("stdout %q stderr %q", out, errb)
	}
	if ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit=5" {
		t.Errorf("close %v", ce)
	}

	// Deleting the session ends followers with "killed".
	cid = e.execAsync("fr", toolbox.SessionExecuteRequest{Command: "echo started; sleep 30", RunAsync: true})
	c2, _ := e.dial(ctx, "fr", cid, true, hdr)
	defer c2.CloseNow()
	if _, data, err := c2.Read(ctx); err != nil || string(data) != "\x01started\n" {
		t.Fatalf("first frame %q %v", data, err)
	}
	done := make(chan struct{})
	go func() { defer close(done); e.expect(204, "DELETE", "/process/session/fr", nil) }()
	_, ce = readAll(ctx, t, c2)
	<-done
	if ce.Code != websocket.StatusNormalClosure || ce.Reason != "killed" {
		t.Errorf("close after delete %v", ce)
	}
}

func TestInputEchoSuppressAndStdinExtension(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("in")
	logs := func(cid string) string {
		data := e.expect(200, "GET", "/process/session/in/command/"+cid+"/logs", nil, sdk...)
		var l toolbox.SessionCommandLogsResponse
		json.Unmarshal(data, &l)
		return l.Stdout
	}
	// Daytona semantics: newline appended, input echoed as stdout.
	cid := e.execAsync("in", toolbox.SessionExecuteRequest{Command: `read a; echo "got $a"`, RunAsync: true})
	e.expect(204, "POST", "/process/session/in/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "one"})
	e.waitExit("in", cid)
	if got := logs(cid); got != "one\ngot one\n" {
		t.Errorf("echo: %q", got)
	}
	// suppressInputEcho: no echo.
	cid = e.execAsync("in", toolbox.SessionExecuteRequest{Command: `read a; echo "got $a"`, RunAsync: true, SuppressInputEcho: true})
	e.expect(204, "POST", "/process/session/in/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "two\n"})
	e.waitExit("in", cid)
	if got := logs(cid); got != "got two\n" {
		t.Errorf("suppressed: %q", got)
	}
	// stdin extension: exact bytes, no echo, close gives EOF.
	cid = e.execAsync("in", toolbox.SessionExecuteRequest{Command: `od -An -c | tr -s ' '`, RunAsync: true})
	e.expect(204, "POST", "/process/session/in/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "a"}, toolbox.HeaderUseExtensions, "stdin")
	e.expect(204, "POST", "/process/session/in/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "b"},
		toolbox.HeaderUseExtensions, "stdin", toolbox.HeaderStdinClose, "true")
	if code := e.waitExit("in", cid); code != 0 {
		t.Errorf("exit %d", code)
	}
	if got := logs(cid); got != " a b\n" {
		t.Errorf("stdin extension: %q", got)
	}
	e.expectError(410, codeGone, "POST", "/process/session/in/command/"+cid+"/input", toolbox.SessionSendInputRequest{Data: "x"}, toolbox.HeaderUseExtensions, "stdin")
	// A synchronous command reads /dev/null.
	if r := e.execSync("in", "cat; echo done"); *r.Stdout != "done\n" {
		t.Errorf("sync stdin: %q", *r.Stdout)
	}
}

func TestLargeOutputSpillsToDisk(t *testing.T) {
	e := newErrEnv(t)
	e.createSession("big")
	const n = 32 << 20
	cid := e.execAsync("big", toolbox.SessionExecuteRequest{Command: fmt.Sprintf("head -c %d /dev/zero", n), RunAsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := e.dial(ctx, "big", cid, true, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
	defer c.CloseNow()
	total := 0
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			break
		}
		if len(data) > maxFramesMessage {
			t.Fatalf("message of %d bytes", len(data))
		}
		total += len(data) - 1
	}
	if total != n {
		t.Errorf("followed %d bytes, want %d", total, n)
	}
	// Raw marker mode over records bigger than a message: markers only at
	// record starts, nothing lost.
	cid = e.execAsync("big", toolbox.SessionExecuteRequest{Command: "seq 1 300000; seq 1 1000 >&2", RunAsync: true})
	c2, _ := e.dial(ctx, "big", cid, true, http.Header{toolbox.HeaderSDKVersion: {toolbox.SDKVersion}})
	defer c2.CloseNow()
	msgs, _ := readAll(ctx, t, c2)
	for _, m := range msgs {
		if len(m) > maxMessage {
			t.Fatalf("message of %d bytes", len(m))
		}
	}
	so, se := demux(concat(msgs))
	var want strings.Builder
	for i := 1; i <= 300000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(so) != want.String() || !strings.HasSuffix(string(se), "\n999\n1000\n") {
		t.Errorf("raw follow: stdout %d bytes (want %d), stderr %d bytes", len(so), want.Len(), len(se))
	}
	files, _ := filepath.Glob(filepath.Join(e.srv.tmpDir, "*", "*.log"))
	if len(files) < 1 {
		t.Errorf("no spill files")
	}
}

func TestSessionWithPOSIXShell(t *testing.T) {
	e := newEnv(t, true, func(o *Options) { o.Shell = "sh" })
	e.createSession("sh")
	e.execSync("sh", "export A='x y'; cd /tmp; exit 4")
	r := e.execSync("sh", `echo "$A" "$PWD"; echo e >&2`)
	if *r.Stdout != "x y /tmp\n" || *r.Stderr != "e\n" {
		t.Errorf("sh session: %+v", r)
	}
	r = e.execSync("sh", "set -e; false; echo no")
	if *r.ExitCode != 1 || *r.Stdout != "" {
		t.Errorf("set -e: %+v", r)
	}
	if r = e.execSync("sh", `echo "$A"`); *r.Stdout != "x y\n" {
		t.Errorf("after set -e: %q", *r.Stdout)
	}
}

func TestParseExportP(t *testing.T) {
	in := "declare -x A=$'multi\\nline \"q\" $x \\\\ `b` \\'s\\''\ndeclare -x B=$'\\001\\002ctl\\377\\x41\\u00e9\\t'\ndeclare -x C=\"it's \\\"q\\\" \\$HOME \\\\ \\`x\\`\"\ndeclare -x D=\"\"\ndeclare -x E\ndeclare -rx F=\"ro\"\nexport G=\"posix\"\ndeclare -x H=\"two\nlines\"\n"
	got, err := parseExportP([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=multi\nline \"q\" $x \\ `b` 's'", "B=\x01\x02ctl\xffA\u00e9\t", "C=it's \"q\" $HOME \\ `x`", "D=", "F=ro", "G=posix", "H=two\nlines"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, bad := range []string{"garbage", "declare -x 1A=\"x\"", "declare -x A=\"unterminated", "declare -x A=$'x"} {
		if _, err := parseExportP([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Values bash prints with any quoting style survive a round trip.
func TestSessionEnvRoundTrip(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("rt")
	val := "a\x01b\nc \"d\" 'e' $f \\g `h` é\t\xff"
	e.expect(200, "POST", "/process/session/rt/exec", toolbox.SessionExecuteRequest{Command: "export V=$'" + strings.NewReplacer("\\", "\\\\", "'", "\\'", "\n", "\\n", "\t", "\\t", "\x01", "\\001", "\xff", "\\377").Replace(val) + "'"})
	resp, data := e.do("POST", "/process/session/rt/exec", toolbox.SessionExecuteRequest{Command: `printf %s "$V"`}, toolbox.HeaderUseExtensions, "base64")
	var r toolbox.SessionExecuteResponse
	json.Unmarshal(data, &r)
	got, _ := base64.StdEncoding.DecodeString(*r.Stdout)
	if resp.StatusCode != 200 || string(got) != val {
		t.Errorf("got %q, want %q", got, val)
	}
}

func TestLargeScriptsAndBackgroundJobs(t *testing.T) {
	e := newEnv(t, true)
	// 200 KiB scripts exceed one exec argument.
	big := "x=1\n" + strings.Repeat("# padding é\n", 200<<10/13) + "echo $x done"
	var r toolbox.ExecuteResponse
	json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: big}), &r)
	if r.ExitCode != 0 || r.Result != "1 done\n" {
		t.Errorf("execute: %+v", r)
	}
	e.createSession("bg")
	if sr := e.execSync("bg", big); *sr.Stdout != "1 done\n" {
		t.Errorf("session: %+v", sr)
	}
	// A background job holding the output does not hold the command: the
	// job still runs when the answer comes.
	sr := e.execSync("bg", "sleep 300 & echo $! > bg.pid; echo fg")
	if *sr.Stdout != "fg\n" {
		t.Errorf("background job: %q", *sr.Stdout)
	}
	killRunning(t, readPids(t, filepath.Join(e.work, "bg.pid"), 1)[0])
	e.expectError(400, codeBadRequest, "POST", "/process/session/bg/exec", toolbox.SessionExecuteRequest{Command: "echo \x00"})
}

func TestInputToQueuedCommand(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("qi")
	first := e.execAsync("qi", toolbox.SessionExecuteRequest{Command: "sleep 0.2", RunAsync: true})
	second := e.execAsync("qi", toolbox.SessionExecuteRequest{Command: "cat", RunAsync: true})
	e.expect(204, "POST", "/process/session/qi/command/"+second+"/input", toolbox.SessionSendInputRequest{Data: "early"},
		toolbox.HeaderUseExtensions, "stdin", toolbox.HeaderStdinClose, "true")
	if c := e.command("qi", first); c.ExitCode != nil {
		t.Fatal("first command ended too soon for this test")
	}
	e.waitExit("qi", second)
	data := e.expect(200, "GET", "/process/session/qi/command/"+second+"/logs", nil)
	if string(data) != "early" {
		t.Errorf("queued input: %q", data)
	}
}

func TestStateSurvivesLowFileDescriptors(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("fd")
	e.execSync("fd", "exec 3>three 4>four 5>five; export Z=1; cd /")
	if r := e.execSync("fd", `echo $Z $PWD`); *r.Stdout != "1 /\n" {
		t.Errorf("state lost: %q", *r.Stdout)
	}
	for _, f := range []string{"three", "four", "five"} {
		if b, err := os.ReadFile(filepath.Join(e.work, f)); err != nil || len(b) != 0 {
			t.Errorf("%s: %q %v", f, b, err)
		}
	}
}

func TestConcurrentSessions(t *testing.T) {
	e := newErrEnv(t)
	const sessions, cmds = 6, 8
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		sid := fmt.Sprintf("c%d", i)
		e.createSession(sid)
		go func() {
			for j := 0; j < cmds; j++ {
				resp, data := e.do("POST", "/process/session/"+sid+"/exec",
					toolbox.SessionExecuteRequest{Command: fmt.Sprintf("echo ${N:-0}; export N=%d", j+1)}, sdk...)
				var r toolbox.SessionExecuteResponse
				json.Unmarshal(data, &r)
				if resp.StatusCode != 200 || r.Stdout == nil || *r.Stdout != fmt.Sprintf("%d\n", j) {
					errs <- fmt.Errorf("%s command %d: %d %s", sid, j, resp.StatusCode, data)
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < sessions; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestSessionPersistsShellVariablesAndFunctions(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("v")
	e.execSync("v", `B=2; arr=(x "y z" $'n\nl'); declare -A m=([k]=v); f() { echo "f:$1"; }; declare -i I=40; readonly RO=ro; IFS=:`)
	r := e.execSync("v", `I+=2; echo "$B|${arr[1]}|${arr[2]}|${m[k]}|$(f a)|$I|$RO|$IFS"`)
	if *r.Stdout != "2|y z|n\nl|v|f:a|42|ro|:\n" || *r.Stderr != "" {
		t.Errorf("got %q, stderr %q", *r.Stdout, *r.Stderr)
	}
	// User functions named like the builtins the session relies on do not
	// break it.
	e.execSync("v", `read() { echo HIJACK; }; exec() { echo HIJACK; }; trap() { echo HIJACK; }; unset() { echo HIJACK; }; set() { echo HIJACK; }; eval() { echo HIJACK; }; printf() { echo HIJACK; }; declare() { echo HIJACK; }; export A7=1; cd /`)
	for i := 0; i < 2; i++ {
		r = e.execSync("v", `echo ok $A7 $PWD $B`)
		if *r.Stdout != "ok 1 / 2\n" || *r.Stderr != "" {
			t.Errorf("after hijack attempt %d: %q %q", i, *r.Stdout, *r.Stderr)
		}
	}
	// Unset variables and functions stay unset.
	e.execSync("v", `builtin unset B; builtin unset -f f`)
	if r = e.execSync("v", `echo "[$B]"; type f >/dev/null 2>&1 || echo nof`); *r.Stdout != "[]\nnof\n" {
		t.Errorf("after unset: %q", *r.Stdout)
	}
}

func TestLogsEdgeCases(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("x")
	cid := e.execAsync("x", toolbox.SessionExecuteRequest{Command: "printf early; sleep 5", RunAsync: true})
	// follow=true without a WebSocket upgrade: an immediate snapshot.
	deadline := time.Now().Add(5 * time.Second)
	for {
		data := e.expect(200, "GET", "/process/session/x/command/"+cid+"/logs?follow=true", nil)
		if string(data) == "early" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot %q", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Without follow, a WebSocket gets what is there and a close.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _ := e.dial(ctx, "x", cid, false, http.Header{toolbox.HeaderUseExtensions: {"frames"}})
	msgs, ce := readAll(ctx, t, c)
	if string(concat(msgs)) != "\x01early" || ce.Code != websocket.StatusNormalClosure || ce.Reason != "" {
		t.Errorf("snapshot follow %q %v", concat(msgs), ce)
	}
	// Unknown command on the WebSocket route: a JSON 404 before any upgrade.
	_, resp, err := websocket.Dial(ctx, "ws://sandbox/process/session/x/command/nope/logs?follow=true", &websocket.DialOptions{HTTPClient: e.client})
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("dial unknown command: %v %v", resp, err)
	}
	e.expect(204, "DELETE", "/process/session/x", nil)

	// Input to a running synchronous command is refused: it reads EOF.
	e.createSession("y")
	done := make(chan struct{})
	go func() { defer close(done); e.execSync("y", "sleep 0.5") }()
	var running string
	for running == "" && time.Now().Before(deadline.Add(5*time.Second)) {
		var ss toolbox.Session
		json.Unmarshal(e.expect(200, "GET", "/process/session/y", nil), &ss)
		if len(ss.Commands) == 1 {
			running = ss.Commands[0].ID
		}
	}
	e.expectError(400, codeBadRequest, "POST", "/process/session/y/command/"+running+"/input", toolbox.SessionSendInputRequest{Data: "x"})
	<-done
}

// The stateless extension: a command sees the session's state but leaves
// nothing behind, and the stateful commands around it work as before.
func TestStatelessExtension(t *testing.T) {
	for _, shell := range []string{"bash", "sh"} {
		t.Run(shell, func(t *testing.T) {
			e := newEnv(t, true, func(o *Options) { o.Shell = shell })
			e.createSession("st")
			e.execSync("st", "export A=1; cd /tmp")
			stateless := []string{toolbox.HeaderUseExtensions, "base64, stateless"}
			r := e.execSync("st", `echo "$A $PWD"; export A=2 B=3; cd /; exit 5`, stateless...)
			if *r.ExitCode != 5 || *r.Stdout != base64.StdEncoding.EncodeToString([]byte("1 /tmp\n")) {
				t.Errorf("stateless: %+v", r)
			}
			r = e.execSync("st", "set -e; cd /; false; echo no", stateless...)
			if *r.ExitCode != 1 || *r.Stdout != "" {
				t.Errorf("stateless set -e: %+v", r)
			}
			r = e.execSync("st", `echo "$A|$B|$PWD"; export C=4`)
			if *r.Stdout != "1||/tmp\n" {
				t.Errorf("after stateless: %q", *r.Stdout)
			}
			if r = e.execSync("st", `echo "$C"`, stateless...); *r.Stdout != base64.StdEncoding.EncodeToString([]byte("4\n")) {
				t.Errorf("stateful before stateless: %q", *r.Stdout)
			}
		})
	}
}

// Binary input with X-Agentbox-Stdin-Encoding: base64, its errors, and
// 410 once nothing reads the input.
func TestStdinBase64AndGone(t *testing.T) {
	e := newEnv(t, true)
	e.createSession("b")
	cid := e.execAsync("b", toolbox.SessionExecuteRequest{Command: `od -An -tx1 | tr -s ' '`, RunAsync: true})
	path := "/process/session/b/command/" + cid + "/input"
	bin := base64.StdEncoding.EncodeToString([]byte{0xff, 0, '\n', 0xc3})
	e.expectError(400, codeBadRequest, "POST", path, toolbox.SessionSendInputRequest{Data: bin}, toolbox.HeaderStdinEncoding, "base64")
	e.expectError(400, codeBadRequest, "POST", path, toolbox.SessionSendInputRequest{Data: bin}, toolbox.HeaderUseExtensions, "stdin", toolbox.HeaderStdinEncoding, "hex")
	e.expectError(400, codeBadRequest, "POST", path, toolbox.SessionSendInputRequest{Data: "!!"}, toolbox.HeaderUseExtensions, "stdin", toolbox.HeaderStdinEncoding, "base64")
	e.expect(204, "POST", path, toolbox.SessionSendInputRequest{Data: bin},
		toolbox.HeaderUseExtensions, "stdin", toolbox.HeaderStdinEncoding, "base64", toolbox.HeaderStdinClose, "true")
	e.waitExit("b", cid)
	data := e.expect(200, "GET", "/process/session/b/command/"+cid+"/logs", nil, sdk...)
	var l toolbox.SessionCommandLogsResponse
	json.Unmarshal(data, &l)
	if l.Stdout != " ff 00 0a c3\n" {
		t.Errorf("binary input: %q", l.Stdout)
	}

	// A command that closed its stdin but still runs: 410, not 408.
	cid = e.execAsync("b", toolbox.SessionExecuteRequest{Command: `exec 0<&-; sleep 2`, RunAsync: true})
	path = "/process/session/b/command/" + cid + "/input"
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body := e.do("POST", path, toolbox.SessionSendInputRequest{Data: "x"}, toolbox.HeaderUseExtensions, "stdin")
		if resp.StatusCode == 410 {
			break
		}
		if resp.StatusCode != 204 || time.Now().After(deadline) {
			t.Fatalf("input to a closed stdin: %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.expectError(410, codeGone, "POST", path, toolbox.SessionSendInputRequest{Data: "y"}, toolbox.HeaderUseExtensions, "stdin")
	e.expect(204, "DELETE", "/process/session/b", nil)
}

// A session's ready shell shows in ps as a short line naming agentbox, not
// its whole program (some 700 characters it was), and runs as "bash", as a
// user's `bash -c` does.
func TestReadyShellCommandLine(t *testing.T) {
	e := newEnv(t, true)
	testenv.Need(t, e.srv.bash, "bash is not installed (Debian package bash): the ready shells are sh")
	e.createSession("ps")
	ss, err := e.srv.session("ps")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	eventually(t, "the ready shell", func() bool {
		pids = findProcs(nil, markerKey+"="+ss.token+":")
		return len(pids) == 1
	})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	line := strings.Join(args, " ")
	if len(args) != 3 || args[0] != "bash" || args[1] != "-c" || len(line) > 120 || !strings.Contains(line, "__agentbox_shell") {
		t.Errorf("ready shell command line (%d bytes): %q; want bash -c and a short line naming agentbox", len(line), line)
	}
	// The command still runs, in the state the program restores.
	if r := e.execSync("ps", "echo $0 $LINENO"); r.Stdout == nil || *r.Stdout != "bash 1\n" {
		t.Errorf("echo $0 $LINENO: %+v", r)
	}
}

// A one-shot execution's errors read as with a user's `bash -c`.
func TestExecuteErrorsReadAsBashC(t *testing.T) {
	e := newEnv(t, true)
	testenv.Need(t, e.srv.bash, "bash is not installed (Debian package bash)")
	for _, c := range []string{"cd /nonexistent", "true\nnosuch"} {
		ref := exec.Command("bash", "-c", c)
		ref.Env, ref.Dir = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.work, "LANG=C"}, e.work // as newEnv's server
		want, _ := ref.CombinedOutput()
		var res toolbox.ExecuteResponse
		json.Unmarshal(e.expect(200, "POST", "/process/execute", toolbox.ExecuteRequest{Command: c}), &res)
		if res.Result != string(want) {
			t.Errorf("execute %q: %q, want %q", c, res.Result, want)
		}
	}
}
