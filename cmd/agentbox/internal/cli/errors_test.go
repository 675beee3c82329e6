package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestJSONErrors: under --json every error is one JSON object with a
// stable code and the exit code, on stdout for the streams of exec and
// logs -f (as their last event) and on stderr otherwise.
func TestJSONErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stream bool // on stdout
		code   string
		exit   int
		msg    string
	}{
		{[]string{"exec", "--json", "--bogus", "--", "true"}, true, KindUsage, ExitUsage, "unknown flag: --bogus"},
		{[]string{"exec", "--bogus", "--json", "--", "true"}, true, KindUsage, ExitUsage, "unknown flag: --bogus"},
		{[]string{"exec", "--json"}, true, KindUsage, ExitUsage, "exec needs a command"},
		{[]string{"exec", "--json", "--timeout", "5", "--", "true"}, true, KindUsage, ExitUsage, "write 5s"},
		{[]string{"exec", "--json", "--", ""}, true, KindUsage, ExitUsage, "the command is empty"},
		{[]string{"--json", "sandbox", "info", "nope"}, false, KindNotFound, ExitError, `no sandbox "nope"`},
		{[]string{"--json", "kill", "abc"}, false, KindUsage, ExitUsage, "positive number"},
		{[]string{"--json", "logs", "--id", "nope", "1"}, false, KindNotFound, ExitError, `no sandbox "nope"`},
		{[]string{"--json", "logs", "-f", "--id", "nope", "1"}, true, KindNotFound, ExitError, `no sandbox "nope"`},
		{[]string{"--json", "spawn", "--", " "}, false, KindUsage, ExitUsage, "the command is empty"},
		{[]string{"--json", "bogus"}, false, KindUsage, ExitUsage, `unknown command "bogus"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t)
			r := h.run(tt.args...)
			out, other := r.stderr, r.stdout
			if tt.stream {
				out, other = r.stdout, r.stderr
			}
			if other != "" {
				t.Errorf("output on the other stream: %v", r)
			}
			e := jsonError(t, out)
			if r.code != tt.exit || e.Code != tt.code || e.ExitCode != tt.exit || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("got %v, want exit %d and a %s error saying %q", r, tt.exit, tt.code, tt.msg)
			}
			if strings.Contains(out, "--help") {
				t.Errorf("a JSON error points at --help: %q", out)
			}
		})
	}
}

// TestExecFailureCodes: exec's own failures exit 125, with the kind of
// failure as the JSON code.
func TestExecFailureCodes(t *testing.T) {
	h := newHarness(t)
	h.e.openErr = errors.New("no isolation here")
	r := h.run("exec", "--json", "--", "true")
	if e := jsonError(t, r.stdout); r.code != ExitExecFailed || e.Code != KindInternal || e.ExitCode != ExitExecFailed || !strings.Contains(e.Message, "no isolation here") {
		t.Errorf("engine failure: %v", r)
	}
	h.e.openErr = nil
	h.e.checkErr = errors.New("state dir /s is writable by group or others")
	for _, tt := range []struct {
		args []string
		code int
	}{{[]string{"exec", "true"}, ExitExecFailed}, {[]string{"sandbox", "ls"}, ExitError}} {
		r := h.run(tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, "writable by group or others (pass --state-dir DIR or set "+StateDirEnv+" to use another)") {
			t.Errorf("%v with an unsafe state dir: %v, want exit %d and the hint", tt.args, r, tt.code)
		}
		r = h.run(append([]string{"--json"}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, `"code":"state_dir"`) {
			t.Errorf("%v --json with an unsafe state dir: %v", tt.args, r)
		}
	}
	if len(h.e.opened) != 0 {
		t.Errorf("a sandbox was opened in an unsafe state dir")
	}
}

// TestExecSignalCodes: the work cancelled with an Interrupt cause exits
// 128 + the signal: 143 for SIGTERM, 130 for SIGINT, and kills the command.
func TestExecSignalCodes(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
		msg  string
	}{{syscall.SIGTERM, ExitTerminated, "terminated"}, {syscall.SIGINT, ExitInterrupted, "interrupted"}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			e := newFakeEngine(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var stdout, stderr strings.Builder
			w := &cancelOnWrite{cancel: func() { cancel(&Interrupt{Signal: tt.sig}) }, on: "started", w: &stdout}
			start := time.Now()
			code := Run(ctx, Config{Engine: e, Stdout: w, Stderr: &stderr, Getenv: func(string) string { return "" }},
				[]string{"exec", "--json", "--", "echo started; exec sleep 10"})
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			s := parseStream(t, stdout.String())
			if last := s.last(); last.Type != "error" || last.Code != KindInterrupted || *last.ExitCode != tt.code || last.Message != tt.msg {
				t.Errorf("last event %+v", last)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the interrupted command ran on for %v", d)
			}
		})
	}
}

// TestExecBlockNetworkOnExistingSandbox: --block-network on a sandbox that
// exists with network access blocks its network first (live), says so,
// and runs the command; when the engine cannot block it, exec refuses
// (exit 2) without running the command.
func TestExecBlockNetworkOnExistingSandbox(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "true")
	r := h.must("exec", "--block-network", "--", "echo ran")
	if r.stdout != "ran\n" || !strings.Contains(r.stderr, `sandbox "default": network blocked`) || !strings.Contains(r.stderr, "sandbox network default --default") {
		t.Errorf("got %v, want the command run after a notice on stderr", r)
	}
	if r := h.must("sandbox", "info", "default"); !strings.Contains(r.stdout, "blocked (loopback only)") {
		t.Errorf("info after --block-network: %s", r.stdout)
	}
	h.must("exec", "--id", "stuck", "true")
	h.e.mu.Lock()
	h.e.networkErr = errors.New("the sandbox shares the host's network")
	h.e.mu.Unlock()
	r = h.run("exec", "--id", "stuck", "--block-network", "--", "echo ran")
	if r.code != ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "could not block it: the sandbox shares the host's network") {
		t.Errorf("got %v, want exit 2, the command not run", r)
	}
	r = h.run("exec", "--id", "stuck", "--json", "--block-network", "--", "echo ran")
	if e := jsonError(t, r.stdout); r.code != ExitUsage || e.Code != KindConfigConflict || e.ExitCode != ExitUsage {
		t.Errorf("--json: %v", r)
	}
	// A new sandbox is made blocked, and keeps accepting the flag.
	h.must("exec", "--block-network", "--id", "closed", "true")
	h.must("exec", "--block-network", "--id", "closed", "true")
	h.must("exec", "--id", "closed", "true")
}

// TestExecSandboxGone: a sandbox stopped or removed while exec runs a
// command ends exec with 137 and a message saying so.
func TestExecSandboxGone(t *testing.T) {
	for _, tt := range []struct {
		verb, past string
		json       bool
	}{{"stop", "stopped", false}, {"rm", "removed", false}, {"stop", "stopped", true}} {
		t.Run(fmt.Sprintf("%s json=%v", tt.verb, tt.json), func(t *testing.T) {
			h := newHarness(t)
			h.must("exec", "true")
			marker := t.TempDir() + "/started"
			args := []string{"exec", "--", "touch " + marker + "; exec sleep 30"}
			if tt.json {
				args = append([]string{"--json"}, args...)
			}
			done := make(chan result, 1)
			go func() { done <- h.run(args...) }()
			waitFile(t, marker)
			h.must("sandbox", tt.verb, DefaultID)
			r := <-done
			msg := r.stderr
			if tt.json {
				e := parseStream(t, r.stdout).last()
				if e.Type != "error" || e.Code != KindSandboxGone || *e.ExitCode != ExitSandboxGone {
					t.Errorf("last event %+v", e)
				}
				msg = e.Message
			}
			if want := fmt.Sprintf("sandbox %q was %s while the command ran", DefaultID, tt.past); r.code != ExitSandboxGone || !strings.Contains(msg, want) {
				t.Errorf("got %v, want exit 137 saying %q", r, want)
			}
		})
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fileExists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClassify pins the exit code and kind of each kind of error.
func TestClassify(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		err  error
		kind string
		code int
	}{
		{usagef("bad"), KindUsage, ExitUsage},
		{fmt.Errorf("x: %w", sandbox.ErrInvalidArgument), KindUsage, ExitUsage},
		{notFoundf("none"), KindNotFound, ExitError},
		{withKind(KindSandboxGone, 0, errors.New("gone")), KindSandboxGone, ExitSandboxGone},
		{withKind(KindConfigConflict, 0, errors.New("net")), KindConfigConflict, ExitUsage},
		{withKind(KindStartFailed, 0, errors.New("start")), KindStartFailed, ExitError},
		{errors.New("other"), KindInternal, ExitError},
	} {
		if f := classify(ctx, nil, tt.err); f.kind != tt.kind || f.code != tt.code {
			t.Errorf("classify(%v) = %s %d, want %s %d", tt.err, f.kind, f.code, tt.kind, tt.code)
		}
	}
}
