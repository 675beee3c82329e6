package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestBuildScript(t *testing.T) {
	got, err := buildScript("echo hi", map[string]string{"B": "it's", "A": "x y"}, "/tmp/my dir", true)
	if err != nil {
		t.Fatal(err)
	}
	want := `(export A='x y' && export B='it'\''s' && cd '/tmp/my dir' && eval 'echo hi') </dev/null`
	if got != want {
		t.Errorf("script\n got %s\nwant %s", got, want)
	}
	got, _ = buildScript("exit 3", nil, "", false)
	if want := `(eval 'exit 3')`; got != want {
		t.Errorf("script\n got %s\nwant %s", got, want)
	}
	got, _ = buildFresh("echo hi\necho 'there'", map[string]string{"A": "1"}, "/d", true)
	if want := "export A=1 && cd /d || exit; exec </dev/null; echo hi\necho 'there'"; got != want {
		t.Errorf("fresh script\n got %s\nwant %s", got, want)
	}
	got, _ = buildFresh("exit 3", nil, "", false)
	if want := "exit 3"; got != want {
		t.Errorf("fresh script\n got %s\nwant %s", got, want)
	}
	for _, build := range []func(string, map[string]string, string, bool) (string, error){buildScript, buildFresh} {
		if _, err := build("true", map[string]string{"1BAD": "x"}, "", false); !errors.Is(err, sandbox.ErrInvalidEnv) {
			t.Errorf("bad env name: err = %v, want ErrInvalidEnv", err)
		}
	}
}

// checkWaitedStream checks the requests (from index skip) of a streaming
// command of Execute on a server without the frames extension: the async
// exec, the waiter (a sync exec answered once the command ended, with its
// exit code), then the log: read whole, or a socket and one read of its
// rest. No look at the command (GET …/command/{id}).
func checkWaitedStream(t *testing.T, log []string, skip int) {
	t.Helper()
	rest := log[min(skip, len(log)):]
	ok := len(rest) >= 3 && len(rest) <= 4 && strings.HasSuffix(rest[0], "/exec") && strings.HasSuffix(rest[1], "/exec")
	for _, r := range rest[min(2, len(rest)):] {
		ok = ok && strings.HasPrefix(r, "GET ") && strings.HasSuffix(r, "/logs")
	}
	if !ok {
		t.Errorf("requests of a streaming command on a plain server: %v", log)
	}
}

// checkPlainStream checks the requests of a spawn's streaming command
// against a server without the agentbox extensions, after the first skip
// requests:
// the async exec and a look at the command (GET …/command/{id}); then,
// when the command had ended, one read of its whole log (GET …/logs) and
// nothing more; else the WebSocket follow, more looks (while the socket
// is open, or once after its close), and, when the command was seen to
// end before the socket closed, one read of the log's rest. How many
// looks it takes depends on how long the command runs.
func checkPlainStream(t *testing.T, log []string, skip int) {
	t.Helper()
	bad := func() { t.Errorf("requests of a streaming command on a plain server: %v", log) }
	isLook := func(r string) bool {
		return strings.HasPrefix(r, "GET ") && strings.Contains(r, "/command/") && !strings.HasSuffix(r, "/logs")
	}
	if len(log) < skip+3 || !strings.HasSuffix(log[skip], "/exec") || !isLook(log[skip+1]) || !strings.HasSuffix(log[skip+2], "/logs") {
		bad()
		return
	}
	rest := log[skip+3:]
	if len(rest) == 0 {
		return // the command had ended: its whole log in one read
	}
	if strings.HasSuffix(rest[len(rest)-1], "/logs") {
		rest = rest[:len(rest)-1]
	}
	if len(rest) == 0 {
		bad()
	}
	for _, r := range rest {
		if !isLook(r) {
			bad()
			return
		}
	}
}

func TestExecuteOneRequest(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r := h.exec(t, "echo", []string{"hello"}, nil)
	if r.Stdout != "hello\n" || r.Stderr != "" || r.ExitCode != 0 || !r.Success() {
		t.Fatalf("result = %+v", r)
	}
	if r.Command != "echo hello" || r.TimedOut || r.Killed || r.Duration <= 0 {
		t.Fatalf("result = %+v", r)
	}
	// The first command created a session; later ones reuse it with one
	// request each.
	h.requests()
	for i := range 5 {
		r := h.exec(t, "echo", []string{fmt.Sprint(i)}, nil)
		if r.Stdout != fmt.Sprintf("%d\n", i) {
			t.Fatalf("stdout = %q", r.Stdout)
		}
		if n, log := h.requests(); n != 1 {
			t.Fatalf("command %d made %d requests, want 1: %v", i, n, log)
		}
	}
	if got := h.host.ensured.Load(); got != 6 {
		t.Errorf("EnsureRunning called %d times, want 6", got)
	}
	if idle := h.m.idleSessions(); len(idle) != 1 || !strings.HasPrefix(idle[0], "agentbox-") {
		t.Errorf("idle sessions = %v, want one agentbox-…", idle)
	}
}

func TestExecuteStreamingRequests(t *testing.T) {
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			plain := sm.plain
			h := newHarness(t, sm.with(harnessOptions{}))
			h.warm(t)
			var out, errb syncBuffer
			r := h.exec(t, "echo out; echo err >&2; exit 7", nil, &sandbox.ExecOptions{Stdout: &out, Stderr: &errb})
			if r.ExitCode != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" {
				t.Fatalf("result = %+v", r)
			}
			if out.String() != "out\n" || errb.String() != "err\n" {
				t.Fatalf("streamed stdout %q stderr %q", out.String(), errb.String())
			}
			if n, log := h.requests(); plain {
				checkWaitedStream(t, log, 0)
			} else if n != 2 { // async exec + follow with the exit code
				t.Fatalf("streaming command made %d requests, want 2: %v", n, log)
			}
			// Its session went back to the pool.
			h.exec(t, "true", nil, nil)
			if n, log := h.requests(); n != 1 {
				t.Fatalf("next command made %d requests, want 1: %v", n, log)
			}
		})
	}
}

func TestExecuteQuoting(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	args := []string{
		"", " ", "plain", "a b", "it's", `"dq"`, "$HOME", "`id`", "$(echo pwned)", "a;b", "a|b",
		"a&&b", "*", "?", "~", "back\\slash", "new\nline", "tab\tx", "-n", "--", "!bang", "'", "''",
		"ü日本語", "%s", "#hash", "a=b", "(x)", "{a,b}", ">out", "<in", "\\'", "end\\",
	}
	for _, streaming := range []bool{false, true} {
		var opts *sandbox.ExecOptions
		var sink syncBuffer
		if streaming {
			opts = &sandbox.ExecOptions{Stdout: &sink}
		}
		r := h.exec(t, "printf '%s\\n'", args, opts)
		want := strings.Join(args, "\n") + "\n"
		if r.Stdout != want || r.ExitCode != 0 {
			t.Errorf("streaming=%v: stdout\n got %q\nwant %q (stderr %q)", streaming, r.Stdout, want, r.Stderr)
		}
		if r.Command != sandbox.CommandLine("printf '%s\\n'", args) {
			t.Errorf("Command = %q", r.Command)
		}
		if streaming && sink.String() != want {
			t.Errorf("streamed %q", sink.String())
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, "out")); err == nil {
		t.Error("an argument was interpreted as a redirection")
	}
}

func TestExecuteShellForms(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cases := []struct {
		command string
		stdout  string
		code    int
	}{
		{"cat <<EOF\nline 1\n$((1+2))\nEOF", "line 1\n3\n", 0},
		{"cat <<'EOF'\n$HOME\nEOF", "$HOME\n", 0},
		{"echo hi # a trailing comment", "hi\n", 0},
		{"echo a\necho b", "a\nb\n", 0},
		{"exit 3", "", 3},
		{"false", "", 1},
		{"set -e; false; echo not reached", "", 1},
		{"echo 'unterminated", "", 2},
		{"echo (", "", 2},
		{"sh -c 'kill -9 $$'", "", 137},
		{"echo partial; exit 42", "partial\n", 42},
		{"printf 'no newline'", "no newline", 0},
		{"read x; echo \"got[$x]\"", "got[]\n", 0},
	}
	for _, c := range cases {
		r := h.exec(t, c.command, nil, nil)
		if r.Stdout != c.stdout || r.ExitCode != c.code {
			t.Errorf("%q: exit %d stdout %q (stderr %q), want exit %d stdout %q", c.command, r.ExitCode, r.Stdout, r.Stderr, c.code, c.stdout)
		}
	}
	// All of that ran in one pooled session, which still works.
	if idle := h.m.idleSessions(); len(idle) != 1 {
		t.Errorf("idle sessions = %v, want 1", idle)
	}
	if r := h.exec(t, "echo", []string{"alive"}, nil); r.Stdout != "alive\n" {
		t.Errorf("session after the cases: %+v", r)
	}
}

// Against agentbox's daemon commands run stateless; against a plain
// Daytona daemon in a subshell. Either way nothing leaks.
func TestExecuteNothingLeaksIntoThePool(t *testing.T) {
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			plain := sm.plain
			h := newHarness(t, sm.with(harnessOptions{manager: Options{MaxIdleSessions: 1}}))
			sub := filepath.Join(h.dir, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []*sandbox.ExecOptions{
				{Env: map[string]string{"PERCALL": "x"}},
				{Env: map[string]string{"PERCALL": "x"}, Stdout: io.Discard},
			} {
				r := h.exec(t, "cd sub; export LEAK=1; LEAK2=2; alias ll=ls; set -u; trap 'echo trapped' EXIT; shopt -s nullglob 2>/dev/null; f() { :; }; exit 3", nil, opts)
				if r.ExitCode != 3 || r.Stdout != "trapped\n" {
					t.Errorf("first command: %+v", r)
				}
				r = h.exec(t, `pwd; echo "${LEAK-unset} ${LEAK2-unset} ${PERCALL-unset} $UNDEFINED_VAR"; type f >/dev/null 2>&1 || echo nof`, nil, nil)
				want := h.dir + "\nunset unset unset \nnof\n"
				if r.Stdout != want || r.ExitCode != 0 {
					t.Errorf("second command saw\n%q (exit %d, stderr %q)\nwant %q", r.Stdout, r.ExitCode, r.Stderr, want)
				}
			}
			// The subshell is there only for plain servers.
			ss, err := h.client.GetSession(context.Background(), h.m.idleSessions()[0])
			if err != nil || len(ss.Commands) == 0 {
				t.Fatalf("GetSession = %+v, %v", ss, err)
			}
			if sub := strings.HasPrefix(ss.Commands[0].Command, "("); sub != plain {
				t.Errorf("sent %q: subshell %v, want %v", ss.Commands[0].Command, sub, plain)
			}
		})
	}
}

func TestExecuteStderrApart(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cmd := "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
	r := h.exec(t, cmd, nil, nil)
	if r.Stdout != "out1\nout2\nout3\n" || r.Stderr != "err1\nerr2\nerr3\n" {
		t.Errorf("sync: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	// One writer for both streams sees every line, in order per stream.
	var both syncBuffer
	r = h.exec(t, cmd, nil, &sandbox.ExecOptions{Stdout: &both, Stderr: &both})
	if r.Stdout != "out1\nout2\nout3\n" || r.Stderr != "err1\nerr2\nerr3\n" {
		t.Errorf("streaming: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(both.String()), "\n")
	slices.Sort(lines)
	if strings.Join(lines, " ") != "err1 err2 err3 out1 out2 out3" {
		t.Errorf("combined writer got %q", both.String())
	}
}

func TestExecuteEnv(t *testing.T) {
	h := newHarness(t, harnessOptions{env: []string{"PATH=" + os.Getenv("PATH"), "A=base", "B=base", "C=base"}})
	h.host.env = map[string]string{"A": "overlay", "B": "overlay", "Q": `it's "$(x)" $HOME` + "\nline2"}
	r := h.exec(t, `printf '%s|' "$A" "$B" "$C" "$Q"`, nil, &sandbox.ExecOptions{Env: map[string]string{"B": "call", "EMPTY": ""}})
	want := "overlay|call|base|it's \"$(x)\" $HOME\nline2|"
	if r.Stdout != want {
		t.Errorf("env\n got %q\nwant %q", r.Stdout, want)
	}
	if r := h.exec(t, `echo "${EMPTY+set}"`, nil, &sandbox.ExecOptions{Env: map[string]string{"EMPTY": ""}}); r.Stdout != "set\n" {
		t.Errorf("empty value: %q", r.Stdout)
	}

	h.requests()
	before := h.host.ensured.Load()
	for _, name := range []string{"1X", "A-B", "", "A B", "X=Y"} {
		_, err := h.m.Execute(context.Background(), "true", nil, &sandbox.ExecOptions{Env: map[string]string{name: "v"}})
		if !errors.Is(err, sandbox.ErrInvalidEnv) {
			t.Errorf("env name %q: err = %v, want ErrInvalidEnv", name, err)
		}
	}
	if n, log := h.requests(); n != 0 {
		t.Errorf("invalid env made %d requests: %v", n, log)
	}
	if h.host.ensured.Load() != before {
		t.Error("invalid env started the sandbox")
	}
}

func TestExecuteCwd(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	odd := filepath.Join(h.dir, "it's a dir")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := h.exec(t, "pwd", nil, nil); r.Stdout != h.dir+"\n" {
		t.Errorf("default cwd = %q, want %q", r.Stdout, h.dir)
	}
	if r := h.exec(t, "pwd", nil, &sandbox.ExecOptions{Cwd: odd}); r.Stdout != odd+"\n" {
		t.Errorf("cwd = %q, want %q", r.Stdout, odd)
	}
	if r := h.exec(t, "pwd", nil, &sandbox.ExecOptions{Cwd: "it's a dir"}); r.Stdout != odd+"\n" {
		t.Errorf("relative cwd = %q, want %q", r.Stdout, odd)
	}
	r := h.exec(t, "echo never", nil, &sandbox.ExecOptions{Cwd: filepath.Join(h.dir, "missing")})
	if r.ExitCode == 0 || r.Stdout != "" || !strings.Contains(r.Stderr, "missing") {
		t.Errorf("missing cwd: %+v", r)
	}

	h2 := newHarness(t, harnessOptions{manager: Options{DefaultCwd: "/"}})
	if r := h2.exec(t, "pwd", nil, nil); r.Stdout != "/\n" {
		t.Errorf("DefaultCwd: pwd = %q", r.Stdout)
	}
}

func TestExecuteInvalidOptions(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.requests()
	for _, opts := range []*sandbox.ExecOptions{{MaxRetainedBytes: -2}, {MaxRetainedBytes: -100}} {
		if _, err := h.m.Execute(context.Background(), "true", nil, opts); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("MaxRetainedBytes %d: err = %v, want ErrInvalidArgument", opts.MaxRetainedBytes, err)
		}
		if _, err := h.m.Spawn(context.Background(), "true", opts); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Spawn MaxRetainedBytes %d: err = %v, want ErrInvalidArgument", opts.MaxRetainedBytes, err)
		}
	}
	for _, cmd := range []string{"", "  \n\t"} {
		if _, err := h.m.Execute(context.Background(), cmd, nil, nil); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("command %q: err = %v, want ErrInvalidArgument", cmd, err)
		}
	}
	if n, log := h.requests(); n != 0 || h.host.ensured.Load() != 0 {
		t.Errorf("invalid options made %d requests (%v) and %d starts", n, log, h.host.ensured.Load())
	}

	h.host.err = &sandbox.NotReadyError{ID: "sb", Err: errors.New("boom")}
	if _, err := h.m.Execute(context.Background(), "true", nil, nil); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("host not ready: err = %v", err)
	}
	if _, err := h.m.Spawn(context.Background(), "true", nil); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("Spawn, host not ready: err = %v", err)
	}
	if n, _ := h.requests(); n != 0 {
		t.Errorf("a sandbox that is not ready got %d requests", n)
	}
}

func TestExecuteTimeoutKillsTree(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			h.warm(t)
			pidFile := filepath.Join(h.dir, "grandchild.pid")
			opts := &sandbox.ExecOptions{Timeout: 500 * time.Millisecond}
			var sink syncBuffer
			if streaming {
				opts.Stdout = &sink
			}
			start := time.Now()
			r := h.exec(t, "echo started; sh -c 'sleep 60 & echo $! > grandchild.pid; wait'", nil, opts)
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("timed out command took %v", d)
			}
			if r.ExitCode != sandbox.ExitTimedOut || !r.TimedOut || !r.Killed || r.Success() {
				t.Fatalf("result = %+v", r)
			}
			if r.Stderr != "Command timed out after 500ms" {
				t.Errorf("stderr = %q", r.Stderr)
			}
			if r.Stdout != "started\n" {
				t.Errorf("stdout before the timeout = %q", r.Stdout)
			}
			waitGone(t, readPID(t, pidFile))
			// The session was deleted, not pooled.
			if idle := h.m.idleSessions(); len(idle) != 0 {
				t.Errorf("idle sessions after a timeout: %v", idle)
			}
			sessions, err := h.client.ListSessions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(sessions) != 0 {
				t.Errorf("sessions left on the server: %v", sessions)
			}
		})
	}
}

func TestExecuteDefaultAndNoTimeout(t *testing.T) {
	h := newHarness(t, harnessOptions{manager: Options{DefaultTimeout: 300 * time.Millisecond}})
	r := h.exec(t, "sleep 5", nil, nil)
	if !r.TimedOut || r.ExitCode != 124 || r.Stderr != "Command timed out after 300ms" {
		t.Errorf("default timeout: %+v", r)
	}
	r = h.exec(t, "sleep 0.5; echo done", nil, &sandbox.ExecOptions{Timeout: -1})
	if r.TimedOut || r.Stdout != "done\n" {
		t.Errorf("no timeout: %+v", r)
	}
	r = h.exec(t, "echo err >&2; sleep 5", nil, &sandbox.ExecOptions{Timeout: 300 * time.Millisecond, Stdout: io.Discard})
	if !r.TimedOut || r.Stderr != "err\n" {
		t.Errorf("timeout with stderr: %+v", r)
	}
}

func TestExecuteCancelKills(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			pidFile := filepath.Join(h.dir, "child.pid")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				readPID(t, pidFile)
				cancel()
			}()
			opts := &sandbox.ExecOptions{}
			if streaming {
				opts.Stderr = io.Discard
			}
			start := time.Now()
			r, err := h.m.Execute(ctx, "sleep 60 & echo $! > child.pid; wait", nil, opts)
			if !errors.Is(err, context.Canceled) || r != nil {
				t.Fatalf("Execute = %+v, %v; want context.Canceled", r, err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("cancel took %v", d)
			}
			waitGone(t, readPID(t, pidFile))
			if idle := h.m.idleSessions(); len(idle) != 0 {
				t.Errorf("idle sessions after a cancel: %v", idle)
			}
		})
	}
}

func TestExecuteStdin(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r := h.exec(t, "wc -l", nil, &sandbox.ExecOptions{Stdin: strings.NewReader("a\nb\nc\n")})
	if strings.TrimSpace(r.Stdout) != "3" {
		t.Errorf("wc -l = %+v", r)
	}
	// Exact bytes (no newline added) and multi-byte runes split across
	// chunk boundaries survive.
	big := strings.Repeat("ü日x", stdinChunk/3) + "end"
	r = h.exec(t, "cat", nil, &sandbox.ExecOptions{Stdin: io.MultiReader(strings.NewReader(big[:5]), strings.NewReader(big[5:]))})
	if r.Stdout != big {
		t.Errorf("cat of %d bytes returned %d bytes", len(big), len(r.Stdout))
	}
	// A slow reader gets all of a large input.
	r = h.exec(t, "sleep 0.3; wc -c", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(strings.Repeat("y", 3<<20))})
	if strings.TrimSpace(r.Stdout) != fmt.Sprint(3<<20) {
		t.Errorf("slow reader: %+v", r)
	}
	// A command that does not read its input ends anyway.
	r = h.exec(t, "echo ignored", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(strings.Repeat("x", 1<<20))})
	if r.Stdout != "ignored\n" {
		t.Errorf("%+v", r)
	}
	// Without Stdin, a streaming command reads an empty input.
	r = h.exec(t, "cat; echo eof", nil, &sandbox.ExecOptions{Stdout: io.Discard, Timeout: 5 * time.Second})
	if r.Stdout != "eof\n" || r.TimedOut {
		t.Errorf("streaming without stdin: %+v", r)
	}
	// Any bytes travel, NUL and invalid UTF-8 included, split anywhere.
	bin := make([]byte, 3*stdinChunk+7)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	var out bytes.Buffer
	r, err := h.m.Execute(context.Background(), "cat", nil, &sandbox.ExecOptions{Stdin: bytes.NewReader(bin), Stdout: &out, Timeout: 10 * time.Second})
	if err != nil || r.ExitCode != 0 || !bytes.Equal(out.Bytes(), bin) {
		t.Errorf("binary stdin: %d bytes back of %d (exit %v, err %v)", out.Len(), len(bin), r, err)
	}
}

// A Stdin that never reaches EOF does not hold Execute once the command
// has ended (os/exec's WaitDelay); the abandoned copy ends when its Read
// returns, and Close waits for it.
func TestExecuteStdinNeverEOF(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("first\n"))
	done := make(chan struct{})
	var r *sandbox.CommandResult
	var err error
	go func() {
		defer close(done)
		r, err = h.m.Execute(context.Background(), "head -n 1", nil, &sandbox.ExecOptions{Stdin: pr, Timeout: 20 * time.Second})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Execute still waits for a Stdin that never ends")
	}
	if err != nil || r.ExitCode != 0 || r.Stdout != "first\n" {
		t.Fatalf("Execute = %+v, %v", r, err)
	}
	// Still usable; then the pipe closes and Close finds nothing running.
	if r := h.exec(t, "echo again", nil, nil); r.Stdout != "again\n" {
		t.Errorf("next command: %+v", r)
	}
	pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestExecuteStdinUnsupported(t *testing.T) {
	for _, sm := range plainModes {
		t.Run(sm.name, func(t *testing.T) { testExecuteStdinUnsupported(t, sm) })
	}
}

func testExecuteStdinUnsupported(t *testing.T, sm serverMode) {
	h := newHarness(t, sm.with(harnessOptions{}))
	_, err := h.m.Execute(context.Background(), "cat", nil, &sandbox.ExecOptions{Stdin: strings.NewReader("x")})
	if !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "stdin extension") {
		t.Errorf("error does not say why: %v", err)
	}
	if sessions, _ := h.client.ListSessions(context.Background()); len(sessions) != 0 {
		t.Errorf("sessions were created: %v", sessions)
	}
}

func TestExecuteLargeAndBinaryOutput(t *testing.T) {
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			plain := sm.plain
			h := newHarness(t, sm.with(harnessOptions{}))
			const n = 8 << 20
			cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo; echo done >&2", n)
			for _, streaming := range []bool{false, true} {
				var sink syncBuffer
				opts := &sandbox.ExecOptions{}
				if streaming {
					opts.Stdout = &sink
				}
				r := h.exec(t, cmd, nil, opts)
				if len(r.Stdout) != n+1 || strings.Trim(r.Stdout, "a\n") != "" || r.Stderr != "done\n" {
					t.Errorf("streaming=%v: stdout %d bytes, stderr %q", streaming, len(r.Stdout), r.Stderr)
				}
				if streaming && len(sink.Bytes()) != n+1 {
					t.Errorf("writer got %d bytes", len(sink.Bytes()))
				}
			}
			if plain {
				return // Daytona's protocol is not binary safe
			}
			data := make([]byte, 256<<10)
			for i := range data {
				data[i] = byte(i*7 + i/256)
			}
			copy(data, "\x01\x01\x01\x02\x02\x02\x00\xff\xfe") // markers, NUL, invalid UTF-8
			if err := os.WriteFile(filepath.Join(h.dir, "blob"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, streaming := range []bool{false, true} {
				var sink, esink syncBuffer
				opts := &sandbox.ExecOptions{}
				if streaming {
					opts.Stdout, opts.Stderr = &sink, &esink
				}
				r := h.exec(t, "cat blob; cat blob >&2", nil, opts)
				if r.Stdout != string(data) || r.Stderr != string(data) {
					t.Errorf("streaming=%v: binary output changed (%d and %d bytes)", streaming, len(r.Stdout), len(r.Stderr))
				}
				if streaming && (!bytes.Equal(sink.Bytes(), data) || !bytes.Equal(esink.Bytes(), data)) {
					t.Errorf("writers got changed binary output")
				}
			}
		})
	}
}

func TestExecuteRetention(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, streaming := range []bool{false, true} {
		var sink syncBuffer
		opts := &sandbox.ExecOptions{MaxRetainedBytes: 4}
		if streaming {
			opts.Stdout = &sink
		}
		r := h.exec(t, "printf 0123456789; printf abc >&2", nil, opts)
		if r.Stdout != "6789" || r.StdoutDroppedBytes != 6 || !r.StdoutTruncated() {
			t.Errorf("streaming=%v: stdout %q dropped %d", streaming, r.Stdout, r.StdoutDroppedBytes)
		}
		if r.Stderr != "abc" || r.StderrDroppedBytes != 0 || r.StderrTruncated() {
			t.Errorf("streaming=%v: stderr %q dropped %d", streaming, r.Stderr, r.StderrDroppedBytes)
		}
		if streaming && sink.String() != "0123456789" {
			t.Errorf("writer got %q", sink.String())
		}
	}
	// Unlimited keeps everything; so does the default.
	for _, max := range []int64{0, sandbox.Unlimited} {
		r := h.exec(t, "head -c 3000000 /dev/zero", nil, &sandbox.ExecOptions{MaxRetainedBytes: max})
		if len(r.Stdout) != 3000000 || r.StdoutDroppedBytes != 0 {
			t.Errorf("MaxRetainedBytes %d: kept %d dropped %d", max, len(r.Stdout), r.StdoutDroppedBytes)
		}
	}
	// A cut never starts inside a UTF-8 sequence.
	r := h.exec(t, "printf 'aé'", nil, &sandbox.ExecOptions{MaxRetainedBytes: 1})
	if r.Stdout != "" || r.StdoutDroppedBytes != 3 {
		t.Errorf("cut rune: %q dropped %d", r.Stdout, r.StdoutDroppedBytes)
	}
}

func TestOutputRetention(t *testing.T) {
	o := output{max: 10}
	var all []byte
	for i := range 1000 {
		p := []byte(strings.Repeat(string(rune('a'+i%26)), i%13))
		o.add(p)
		all = append(all, p...)
	}
	got, dropped := o.snapshot()
	if want := string(all[len(all)-10:]); got != want || dropped != int64(len(all)-10) {
		t.Errorf("got %q dropped %d, want %q dropped %d", got, dropped, want, len(all)-10)
	}
	if cap(o.buf) > 64 {
		t.Errorf("buffer capacity grew to %d", cap(o.buf))
	}
	for _, max := range []int64{1, 3, 7, 16} {
		o := output{max: max}
		var all []byte
		for i := range 300 {
			p := []byte(strings.Repeat(string(rune('A'+i%26)), i%19))
			o.add(p)
			all = append(all, p...)
			got, dropped := o.snapshot()
			keep := min(int(max), len(all))
			if got != string(all[len(all)-keep:]) || dropped != int64(len(all)-keep) {
				t.Fatalf("max %d step %d: got %q dropped %d, want %q", max, i, got, dropped, all[len(all)-keep:])
			}
		}
	}
}

func TestExecuteWriterFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r, err := h.m.Execute(context.Background(), "echo a; echo b", nil, &sandbox.ExecOptions{Stdout: failingWriter{}})
	if !errors.Is(err, errWriter) || r == nil || r.Stdout != "a\nb\n" || r.ExitCode != 0 {
		t.Errorf("Execute = %+v, %v", r, err)
	}
}

func TestExecuteConcurrent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 6 {
				want := fmt.Sprintf("%d-%d", g, i)
				var opts *sandbox.ExecOptions
				var sink syncBuffer
				if i%2 == 1 {
					opts = &sandbox.ExecOptions{Stdout: &sink}
				}
				r, err := h.m.Execute(context.Background(), "sleep 0.0$RANDOM; echo", []string{want}, opts)
				switch {
				case err != nil:
					errs <- err
				case r.Stdout != want+"\n":
					errs <- fmt.Errorf("streaming=%v: got %q, want %q (exit %d, stderr %q, %v)", opts != nil, r.Stdout, want, r.ExitCode, r.Stderr, r.Duration)
				case opts != nil && sink.String() != want+"\n":
					errs <- fmt.Errorf("streamed %q, want %q", sink.String(), want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if idle := h.m.idleSessions(); len(idle) > DefaultMaxIdleSessions {
		t.Errorf("%d idle sessions, more than the pool size", len(idle))
	}
	sessions, err := h.client.ListSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != len(h.m.idleSessions()) {
		t.Errorf("%d sessions on the server, %d pooled: surplus sessions were not deleted", len(sessions), len(h.m.idleSessions()))
	}
}

// The first command after the pooled sessions vanished (the sandbox
// restarted) recreates its session transparently, once: Daytona's daemon
// answers the exec in the unknown session with 500, agentbox's with 404.
func TestExecuteVanishedSession(t *testing.T) {
	for _, sm := range serverModes {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", sm.name, streaming), func(t *testing.T) {
				testExecuteVanishedSession(t, sm, streaming)
			})
		}
	}
}

func testExecuteVanishedSession(t *testing.T, sm serverMode, streaming bool) {
	h := newHarness(t, sm.with(harnessOptions{}))
	h.warm(t)
	// The sandbox restarted: its sessions are gone.
	for _, id := range h.m.idleSessions() {
		if err := h.client.DeleteSession(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	h.requests()
	opts := &sandbox.ExecOptions{}
	if streaming {
		opts.Stdout = io.Discard
	}
	r := h.exec(t, "echo", []string{"again"}, opts)
	if r.Stdout != "again\n" {
		t.Fatalf("%+v", r)
	}
	n, log := h.requests()
	if len(log) < 2 || !strings.HasSuffix(log[0], "/exec") || log[1] != "POST /process/session" {
		t.Errorf("requests %v: want the failed exec, then a new session", log)
	}
	switch {
	case streaming && sm.plain:
		checkWaitedStream(t, log, 2)
	case streaming && n != 4: // failed exec, new session, exec, follow
		t.Errorf("%d requests, want 4: %v", n, log)
	case !streaming && n != 3: // failed exec, new session, exec
		t.Errorf("%d requests, want 3: %v", n, log)
	}
}

func TestResetAndNoPool(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.warm(t)
	old := h.m.idleSessions()
	h.m.Reset()
	if len(h.m.idleSessions()) != 0 {
		t.Fatal("Reset kept idle sessions")
	}
	h.exec(t, "true", nil, nil)
	if idle := h.m.idleSessions(); len(idle) != 1 || idle[0] == old[0] {
		t.Errorf("after Reset: idle %v (old %v)", idle, old)
	}
	h.client.DeleteSession(context.Background(), old[0])

	h2 := newHarness(t, harnessOptions{manager: Options{MaxIdleSessions: -1}})
	for range 3 {
		h2.exec(t, "true", nil, nil)
	}
	if idle := h2.m.idleSessions(); len(idle) != 0 {
		t.Errorf("pooling disabled, yet idle %v", idle)
	}
	if sessions, _ := h2.client.ListSessions(context.Background()); len(sessions) != 0 {
		t.Errorf("pooling disabled, sessions left: %v", sessions)
	}
}

// A command whose output is collected into the result costs, client and
// server together, about one allocation of the output's size: the answer
// is raw (the binary extension), read into strings of their exact size,
// and the server streams it from its log through a fixed buffer. (Before,
// the JSON answer carried the output twice, NULs as \u0000 and base64,
// and cost many times the output.)
func TestExecuteBufferedAllocations(t *testing.T) {
	h := newHarness(t, harnessOptions{noSpec: true})
	h.warm(t)
	const n = 32 << 20
	for _, cmd := range []string{
		fmt.Sprintf("head -c %d /dev/zero", n),
		fmt.Sprintf("yes 'a line of text, as a build prints it' | head -c %d", n),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := h.exec(t, cmd, nil, nil)
		runtime.ReadMemStats(&after)
		if len(r.Stdout) != n || r.ExitCode != 0 {
			t.Fatalf("%s: %d bytes, exit %d", cmd, len(r.Stdout), r.ExitCode)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d MiB allocated", cmd, alloc>>20)
		if alloc > n+n/4+4<<20 {
			t.Errorf("%s: %d MiB allocated for %d MiB of output", cmd, alloc>>20, n>>20)
		}
	}
}

// A stream retained whole keeps its first bytes in memory and the rest in
// an unlinked file, and reads back complete, before and after finish.
func TestOutputSpill(t *testing.T) {
	o := output{max: sandbox.Unlimited}
	var all []byte
	chunk := make([]byte, 300<<10)
	for i := 0; len(all) < spillRetained*2+12345; i++ {
		p := chunk[:len(chunk)-i%7]
		for j := range p {
			p[j] = byte(i + j)
		}
		o.add(p)
		all = append(all, p...)
	}
	if o.spill == nil || cap(o.mem) > spillRetained || o.total() != int64(len(all)) {
		t.Fatalf("in memory %d bytes (capacity %d), spill %v, total %d of %d", len(o.mem), cap(o.mem), o.spill != nil, o.total(), len(all))
	}
	if got, dropped := o.snapshot(); got != string(all) || dropped != 0 {
		t.Fatalf("snapshot: %d bytes (dropped %d), want %d, equal %v", len(got), dropped, len(all), got == string(all))
	}
	got, _ := o.finish()
	if got != string(all) || o.spill != nil || o.total() != int64(len(all)) {
		t.Fatalf("finish: %d bytes, equal %v, spill %v", len(got), got == string(all), o.spill != nil)
	}
	if again := o.String(); again != got {
		t.Fatal("the finished text changed")
	}
	// A small stream stays in memory and costs no copy.
	small := output{max: sandbox.Unlimited}
	small.add([]byte("abc"))
	if s, _ := small.finish(); s != "abc" || small.spill != nil {
		t.Fatalf("small: %q", s)
	}
}

// Streaming a command's output to a writer while the result keeps all of
// it (the default) costs, client and server together, about the output's
// size once: the retained bytes are not copied again and again as one
// buffer grows, nor once more into the result. (Before, 256 MiB of output
// peaked at 1.2 GiB.)
func TestExecuteStreamingAllocations(t *testing.T) {
	h := newHarness(t, harnessOptions{noSpec: true})
	h.warm(t)
	const n = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := h.exec(t, fmt.Sprintf("head -c %d /dev/zero", n), nil, &sandbox.ExecOptions{Stdout: io.Discard})
	runtime.ReadMemStats(&after)
	if len(r.Stdout) != n || r.ExitCode != 0 {
		t.Fatalf("%d bytes, exit %d", len(r.Stdout), r.ExitCode)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d MiB allocated for %d MiB of output", alloc>>20, n>>20)
	if alloc > n+n/2 {
		t.Errorf("%d MiB allocated for %d MiB of output", alloc>>20, n>>20)
	}
}
