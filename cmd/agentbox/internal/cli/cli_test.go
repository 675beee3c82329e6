package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is the outcome of one agentbox invocation.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// harness runs agentbox command lines in-process against one engine.
type harness struct {
	t     *testing.T
	e     *fakeEngine
	env   map[string]string
	stdin io.Reader // for the next run only
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, e: newFakeEngine(t), env: map[string]string{}}
}

func (h *harness) run(args ...string) result {
	return h.runCtx(context.Background(), args...)
}

func (h *harness) runCtx(ctx context.Context, args ...string) result {
	h.t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(ctx, Config{
		Engine: h.e,
		Stdin:  h.stdin,
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string { return h.env[k] },
	}, args)
	if h.stdin != nil { // written only when set: concurrent runs pass none
		h.stdin = nil
	}
	return result{code, stdout.String(), stderr.String()}
}

// must runs args and fails the test unless they exit 0.
func (h *harness) must(args ...string) result {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("agentbox %s: %v", strings.Join(args, " "), r)
	}
	return r
}

func TestExecStreamsOutputAndExitCode(t *testing.T) {
	h := newHarness(t)
	r := h.run("exec", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3")
	if r.code != 3 || r.stdout != "hi\n" || r.stderr != "oops\n" {
		t.Fatalf("got %v, want exit 3, stdout \"hi\\n\", stderr \"oops\\n\"", r)
	}
	if st := h.e.state(h.e.defaultDir, DefaultID); st == nil || st.info.Status != sandbox.StatusRunning {
		t.Fatalf("exec did not leave sandbox %q running in the default state dir", DefaultID)
	}
	r = h.must("exec", "true")
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("exec true printed %v", r)
	}
}

func TestExecQuotesArgsNotCommand(t *testing.T) {
	h := newHarness(t)
	// The command is a shell line; each arg stays one argument.
	r := h.must("exec", "--", "printf '%s|'", "a b", "c'd", "$HOME", "")
	if want := "a b|c'd|$HOME||"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	// Without "--", flags after the command belong to the command.
	r = h.must("exec", "echo", "-n", "--id", "x")
	if r.stdout != "--id x" {
		t.Errorf("stdout %q, want %q", r.stdout, "--id x")
	}
	if h.e.state(h.e.defaultDir, "x") != nil {
		t.Error("--id after the command was taken as agentbox's flag")
	}
}

func TestExecOptions(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	r := h.must("exec", "--id", "opts", "-e", "A=1", "--env", "B=x=y", "--cwd", dir, "--block-network", "--", `echo "$A $B"; pwd`)
	if want := "1 x=y\n" + dir + "\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if len(h.e.opened) != 1 || !reflect.DeepEqual(h.e.opened[0], OpenOptions{StateDir: h.e.defaultDir, ID: "opts", Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked}}) {
		t.Errorf("opened %+v", h.e.opened)
	}
}

// TestExecStdin: the command reads agentbox's input only with -i; without
// it, an empty input (agentbox in a loop must not swallow the loop's
// input).
func TestExecStdin(t *testing.T) {
	h := newHarness(t)
	h.stdin = strings.NewReader("some input")
	if r := h.must("exec", "-i", "--", "cat"); r.stdout != "some input" {
		t.Errorf("exec -i: stdout %q, want the input", r.stdout)
	}
	in := strings.NewReader("left for the next reader")
	h.stdin = in
	if r := h.must("exec", "--", "wc", "-c"); strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("exec without -i read %q of its input", r.stdout)
	}
	if in.Len() != len("left for the next reader") {
		t.Errorf("exec without -i consumed agentbox's input")
	}
	// Without stdin at all the command reads an empty input rather than hanging.
	if r := h.must("exec", "-i", "--", "wc", "-c"); strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("wc -c of no input: %q", r.stdout)
	}
}

// TestExecScript: exec -i without a command runs the script on standard
// input as the command.
func TestExecScript(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	h.stdin = strings.NewReader("cd " + dir + "\nA=one\ncat <<EOF\n$A $(pwd)\nEOF\nread x || echo no-input\nexit 7\n")
	r := h.run("exec", "-i", "-e", "B=2")
	if want := "one " + dir + "\nno-input\n"; r.code != 7 || r.stdout != want {
		t.Errorf("exec -i of a script: %v, want exit 7 and stdout %q", r, want)
	}
	for _, tt := range []struct {
		stdin io.Reader
		want  string
	}{
		{nil, "which is empty"},
		{strings.NewReader(" \n\t\n"), "which is empty"},
		{strings.NewReader(strings.Repeat("#", maxScript+1)), "larger than 1024 KiB"},
	} {
		h.stdin = tt.stdin
		r := h.run("exec", "-i")
		if r.code != ExitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("exec -i: %v, want exit 2 saying %q", r, tt.want)
		}
	}
}

func TestExecTimeout(t *testing.T) {
	h := newHarness(t)
	start := time.Now()
	r := h.run("exec", "--timeout", "200ms", "--", "sleep", "10")
	if r.code != sandbox.ExitTimedOut {
		t.Fatalf("got %v, want exit 124", r)
	}
	if !strings.Contains(r.stderr, "timed out") {
		t.Errorf("stderr %q does not say the command timed out", r.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

// event is any JSON line of a stream.
type event struct {
	Type       string  `json:"type"`
	Sandbox    string  `json:"sandbox"`
	Process    int     `json:"process"`
	Command    string  `json:"command"`
	Data       string  `json:"data"`
	Encoding   string  `json:"encoding"`
	ExitCode   *int    `json:"exitCode"`
	TimedOut   bool    `json:"timedOut"`
	Killed     bool    `json:"killed"`
	DurationMs float64 `json:"durationMs"`
	Code       string  `json:"code"`
	Message    string  `json:"message"`
}

// stream parses a stream of JSON lines: its events and the bytes of its
// stdout and stderr chunks.
type stream struct {
	events         []event
	stdout, stderr []byte
}

func parseStream(t *testing.T, out string) stream {
	t.Helper()
	var s stream
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Errorf("stream does not end with a newline: %q", line)
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %v: %q", err, line)
		}
		s.events = append(s.events, e)
		var data []byte
		switch e.Encoding {
		case "utf-8":
			data = []byte(e.Data)
		case "base64":
			b, err := base64.StdEncoding.DecodeString(e.Data)
			if err != nil {
				t.Fatalf("bad base64: %v: %q", err, line)
			}
			data = b
		case "":
		default:
			t.Fatalf("unknown encoding %q", e.Encoding)
		}
		switch e.Type {
		case "stdout":
			s.stdout = append(s.stdout, data...)
		case "stderr":
			s.stderr = append(s.stderr, data...)
		}
	}
	return s
}

// types returns the types of the events, adjacent chunks of one stream
// counted once.
func (s stream) types() []string {
	var out []string
	for _, e := range s.events {
		if len(out) > 0 && out[len(out)-1] == e.Type && (e.Type == "stdout" || e.Type == "stderr") {
			continue
		}
		out = append(out, e.Type)
	}
	return out
}

func (s stream) last() event { return s.events[len(s.events)-1] }

func TestExecJSON(t *testing.T) {
	h := newHarness(t)
	r := h.run("exec", "--json", "--", "sh", "-c", "echo out; sleep 0.1; printf 'caf\\303\\251 \\377\\000' >&2; exit 4")
	if r.code != 4 || r.stderr != "" {
		t.Fatalf("got %v, want exit 4 and nothing on stderr", r)
	}
	s := parseStream(t, r.stdout)
	if got := strings.Join(s.types(), ","); got != "start,stdout,stderr,exit" {
		t.Errorf("events %s, want start,stdout,stderr,exit: %s", got, r.stdout)
	}
	if e := s.events[0]; e.Sandbox != DefaultID || e.Command != `sh -c 'echo out; sleep 0.1; printf '\''caf\303\251 \377\000'\'' >&2; exit 4'` {
		t.Errorf("start event %+v", e)
	}
	if string(s.stdout) != "out\n" || string(s.stderr) != "caf\u00e9 \xff\x00" {
		t.Errorf("stdout %q, stderr %q: bytes did not survive", s.stdout, s.stderr)
	}
	if e := s.events[1]; e.Encoding != "utf-8" || e.Data != "out\n" {
		t.Errorf("text chunk %+v, want utf-8", e)
	}
	if e := s.last(); e.Type != "exit" || e.ExitCode == nil || *e.ExitCode != 4 || e.TimedOut || e.Killed || e.DurationMs < 100 {
		t.Errorf("exit event %+v", e)
	}
	if !strings.Contains(r.stdout, `"command":"sh -c 'echo out;`) || !strings.Contains(r.stdout, ">&2") {
		t.Errorf("the stream escapes the command's > or &: %s", r.stdout)
	}
	// A timeout is an exit event, not an error.
	r = h.run("exec", "--json", "--timeout", "100ms", "--", "sleep", "10")
	if e := parseStream(t, r.stdout).last(); r.code != sandbox.ExitTimedOut || e.Type != "exit" || *e.ExitCode != 124 || !e.TimedOut || !e.Killed {
		t.Errorf("timeout under --json: %v", r)
	}
}

// TestChunkWriter: a UTF-8 character cut by the end of a write is held
// back so that text stays text; bytes that cannot become text are base64.
func TestChunkWriter(t *testing.T) {
	var out bytes.Buffer
	s := newEventStream(&out)
	w := s.output("stdout")
	euro := "\u20ac" // 3 bytes
	for _, p := range []string{"a" + euro[:1], euro[1:2], euro[2:] + "b", "\xff", "c" + euro[:2]} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := parseStream(t, out.String())
	var got []string
	for _, e := range st.events {
		got = append(got, e.Encoding+":"+e.Data)
	}
	want := []string{"utf-8:a", "utf-8:" + euro + "b", "base64:/w==", "utf-8:c", "base64:4oI="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks %q, want %q", got, want)
	}
	if string(st.stdout) != "a"+euro+"b\xffc"+euro[:2] {
		t.Errorf("bytes %q", st.stdout)
	}
}

func TestExecEngineFailure(t *testing.T) {
	h := newHarness(t)
	h.e.openErr = errors.New("no isolation here")
	r := h.run("exec", "--", "true")
	if r.code != ExitExecFailed || !strings.Contains(r.stderr, "no isolation here") {
		t.Errorf("got %v, want exit 125 with the cause", r)
	}
	h.e.openErr = fmt.Errorf("id %q has a slash: %w", "a/b", sandbox.ErrInvalidArgument)
	if r := h.run("exec", "--id", "a/b", "--", "true"); r.code != ExitUsage {
		t.Errorf("invalid id: got %v, want exit 2", r)
	}
}

// cancelOnWrite cancels a context at the first write (holding on, when
// set), as an interrupt arriving once a command has started, and passes
// the writes on to w, when set.
type cancelOnWrite struct {
	cancel func()
	on     string
	w      io.Writer
	once   sync.Once
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if c.on == "" || bytes.Contains(p, []byte(c.on)) {
		c.once.Do(c.cancel)
	}
	if c.w != nil {
		return c.w.Write(p)
	}
	return len(p), nil
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestExecInterrupted(t *testing.T) {
	e := newFakeEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	start := time.Now()
	code := Run(ctx, Config{Engine: e, Stdout: &cancelOnWrite{cancel: cancel}, Stderr: &stderr, Getenv: func(string) string { return "" }},
		[]string{"exec", "--", "echo started; exec sleep 10"})
	if code != ExitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q; want exit 130", code, stderr.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the interrupted command ran on for %v", d)
	}
}

func TestUsageErrors(t *testing.T) {
	const secret = "s3cr3t-value"
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"exec", "--env", "FOO", "--", "true"}, "NAME=VALUE"},
		{[]string{"exec", "--env", secret, "--", "true"}, "has no '='"},
		{[]string{"exec", "--env", "1BAD=" + secret, "--", "true"}, `invalid variable name "1BAD"`},
		{[]string{"exec", "--env", "A-B=" + secret, "--", "true"}, "[A-Za-z_][A-Za-z0-9_]*"},
		{[]string{"exec", "--env", "A=1", "--env", "=" + secret, "--", "true"}, "--env #2"},
		{[]string{"exec", "--timeout", "abc", "--", "true"}, "30s, 5m or 1h30m"},
		{[]string{"exec", "--timeout", "5", "--", "true"}, "write 5s"},
		{[]string{"exec", "--timeout", "-1s", "--", "true"}, "write 0 for no timeout"},
		{[]string{"exec", "--id", "", "--", "true"}, "--id is empty"},
		{[]string{"exec"}, "exec needs a command"},
		{[]string{"exec", "--bogus", "--", "true"}, "unknown flag: --bogus"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"sandbox", "bogus"}, `unknown command "bogus"`},
		{[]string{"sandbox"}, "Usage:"},
		{[]string{}, "Usage:"},
		{[]string{"sandbox", "info"}, "needs a sandbox id"},
		{[]string{"sandbox", "info", "a", "b"}, "needs a sandbox id"},
		{[]string{"sandbox", "rm"}, "at least one sandbox id"},
		{[]string{"sandbox", "ls", "x"}, "takes no arguments"},
		{[]string{"kill"}, "the ID of a process"},
		{[]string{"kill", "abc"}, `process ID must be a positive number`},
		{[]string{"kill", "0"}, `process ID must be a positive number`},
		{[]string{"logs"}, "the ID of a process"},
		{[]string{"logs", "agentbox-bg-x"}, `process ID must be a positive number`},
		{[]string{"logs", "-3"}, `unknown shorthand flag`},
		{[]string{"spawn"}, "spawn needs a command"},
		{[]string{"spawn", "--", ""}, "the command is empty: give a shell command line, as in agentbox spawn -- echo hello"},
		{[]string{"exec", "--", ""}, "the command is empty: give a shell command line, as in agentbox exec -- echo hello"},
		{[]string{"spawn", "--timeout", "soon", "--", "true"}, "30s, 5m or 1h30m"},
		{[]string{"spawn", "--env", "1BAD=" + secret, "--", "true"}, `invalid variable name "1BAD"`},
		{[]string{"spawn", "--id", "", "--", "true"}, "--id is empty"},
		{[]string{"logs", "-f"}, "the ID of a process"},
		{[]string{"exec", "-i", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--state-dir", "", "sandbox", "ls"}, "--state-dir is empty"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t)
			r := h.run(tt.args...)
			if r.code != ExitUsage {
				t.Errorf("got %v, want exit 2", r)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.want)
			}
			if strings.Contains(r.stderr, secret) || strings.Contains(r.stdout, secret) {
				t.Errorf("output echoes the secret: %v", r)
			}
			if len(h.e.opened) != 0 {
				t.Errorf("a sandbox was opened for a bad command line")
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	h := newHarness(t)
	r := h.must("exec", "--help")
	if !strings.Contains(r.stdout, "agentbox exec [flags] [--] COMMAND [ARG...]") || !strings.Contains(r.stdout, "--timeout") {
		t.Errorf("help: %q", r.stdout)
	}
}

// TestProcessHelpSaysID checks that the commands about background
// processes call their number an ID and say it is not a PID.
func TestProcessHelpSaysID(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct{ cmd, usage string }{
		{"spawn", "print its ID"},
		{"ps", "agentbox ps [flags]"},
		{"logs", "agentbox logs [flags] ID\n"},
		{"kill", "agentbox kill [flags] ID...\n"},
	} {
		r := h.must(tt.cmd, "--help")
		if !strings.Contains(r.stdout, tt.usage) || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "not a PID") {
			t.Errorf("%s --help lacks %q or \"not a PID\": %q", tt.cmd, tt.usage, r.stdout)
		}
	}
	if r := h.must("exec", "--help"); !strings.Contains(r.stdout, "default: the sandbox's working directory") {
		t.Errorf("exec --help does not say --cwd defaults to the sandbox's working directory: %q", r.stdout)
	}
}

// checkJSON fails the test unless got and want are the same JSON value.
func checkJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("%s: not JSON: %v: %q", what, err, got)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %s\nwant: %s", what, got, want)
	}
}

func TestStateDir(t *testing.T) {
	h := newHarness(t)
	envDir, flagDir := t.TempDir(), t.TempDir()
	h.env[StateDirEnv] = envDir
	h.must("exec", "true")
	h.must("--state-dir", flagDir, "exec", "true")
	h.must("exec", "--state-dir", flagDir, "--id", "two", "true")
	if h.e.state(envDir, DefaultID) == nil || h.e.state(flagDir, DefaultID) == nil || h.e.state(flagDir, "two") == nil {
		t.Fatalf("sandboxes were not made in the right state dirs: %+v", h.e.opened)
	}
	if h.e.state(h.e.defaultDir, DefaultID) != nil {
		t.Error("the default state dir was used despite " + StateDirEnv)
	}
	r := h.must("--state-dir", flagDir, "sandbox", "ls")
	if !strings.Contains(r.stdout, "two") || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("ls of %s: %q", flagDir, r.stdout)
	}
}

func TestSandboxCommands(t *testing.T) {
	h := newHarness(t)
	r := h.must("sandbox", "ls")
	if strings.TrimSpace(r.stdout) != "ID  STATUS  CREATED  LAST USED" {
		t.Errorf("empty ls: %q", r.stdout)
	}
	if r := h.must("sandbox", "ls", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty ls --json: %q", r.stdout)
	}
	h.must("exec", "--id", "b", "true")
	h.must("exec", "--id", "a", "true")

	r = h.must("sandbox", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "a ") || !strings.HasPrefix(lines[2], "b ") ||
		!strings.Contains(lines[1], "running") || !strings.Contains(lines[1], "ago") && !strings.Contains(lines[1], "just now") {
		t.Errorf("ls: %q", r.stdout)
	}
	var infos []sandbox.Info
	r = h.must("sandbox", "ls", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil || len(infos) != 2 || infos[0].ID != "a" || infos[0].Status != sandbox.StatusRunning {
		t.Errorf("ls --json: %v: %q", err, r.stdout)
	}

	r = h.must("sandbox", "info", "a")
	for _, want := range []string{"ID:", "a\n", "Status:", "running", "Provider:", "fake", "Metadata:", "k=v"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info lacks %q: %q", want, r.stdout)
		}
	}
	var info sandbox.Info
	r = h.must("sandbox", "info", "--json", "a")
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.ID != "a" || info.Metadata["k"] != "v" {
		t.Errorf("info --json: %v: %q", err, r.stdout)
	}

	if r := h.must("sandbox", "stop", "a"); r.stdout != "stopped a\n" {
		t.Errorf("stop: %q", r.stdout)
	}
	if st := h.e.state(h.e.defaultDir, "a"); st.info.Status != sandbox.StatusStopped {
		t.Errorf("status after stop: %s", st.info.Status)
	}
	if r := h.must("sandbox", "rm", "--json", "a", "b"); strings.Join(strings.Fields(r.stdout), "") != `[{"id":"a","status":"removed"},{"id":"b","status":"removed"}]` {
		t.Errorf("rm --json: %q", r.stdout)
	}
	if r := h.must("sandbox", "ls", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ls after rm: %q", r.stdout)
	}
}

func TestSandboxUnknownID(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "known", "true")
	for _, args := range [][]string{
		{"sandbox", "info", "nope"},
		{"sandbox", "stop", "nope"},
		{"sandbox", "rm", "nope"},
		{"sandbox", "info", "--json", "nope"},
		{"ps", "--id", "nope"},
		{"kill", "--id", "nope", "1"},
		{"logs", "--id", "nope", "1"},
	} {
		r := h.run(args...)
		msg := r.stderr
		if slices.Contains(args, "--json") {
			e := jsonError(t, r.stderr)
			if e.Code != KindNotFound || e.ExitCode != r.code {
				t.Errorf("%v: error %+v, want code not_found and the exit code", args, e)
			}
			msg = e.Message
		}
		if r.code != ExitError || !strings.Contains(msg, `no sandbox "nope"`) || !strings.Contains(msg, "agentbox sandbox ls") {
			t.Errorf("%v: got %v, want exit 1 naming the id", args, r)
		}
	}
	// rm goes on past an unknown id and still fails.
	r := h.run("sandbox", "rm", "nope", "known")
	if r.code != ExitError || r.stdout != "removed known\n" {
		t.Errorf("rm nope known: %v", r)
	}
}

func TestBackgroundProcesses(t *testing.T) {
	h := newHarness(t)
	if r := h.must("spawn", "--", "sleep", "30"); r.stdout != "1\n" {
		t.Fatalf("spawn printed %q, want ID 1", r.stdout)
	}
	r := h.must("spawn", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 5")
	var sr map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &sr); err != nil || sr["id"] != 2.0 || sr["sandbox"] != DefaultID ||
		sr["session"] != BackgroundSessionPrefix+"2" || sr["pid"] != nil {
		t.Fatalf("spawn --json: %v: %q", err, r.stdout)
	}
	h.e.waitExit(t, "2")

	r = h.must("ps")
	want := "ID  STATUS      COMMAND\n" +
		"1   running     sleep 30\n" +
		"2   exited (5)  sh -c 'echo out; echo err >&2; exit 5'\n"
	if r.stdout != want {
		t.Errorf("ps:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = h.must("ps", "--json")
	wantJSON := `[{"id":1,"command":"sleep 30","running":true},` +
		`{"id":2,"command":"sh -c 'echo out; echo err >&2; exit 5'","running":false,"exitCode":5}]`
	checkJSON(t, "ps --json", r.stdout, wantJSON)

	if r := h.must("logs", "2"); r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("logs 2: %v", r)
	}
	r = h.must("logs", "--json", "2")
	wantJSON = `{"id":2,"command":"sh -c 'echo out; echo err >&2; exit 5'","running":false,"exitCode":5,"stdout":"out\n","stderr":"err\n"}`
	checkJSON(t, "logs --json 2", r.stdout, wantJSON)
	if r := h.must("kill", "1"); r.stdout != "killed 1\n" {
		t.Errorf("kill 1: %q", r.stdout)
	}
	r = h.must("kill", "--json", "agentbox-bg-2")
	checkJSON(t, "kill --json agentbox-bg-2", r.stdout, `[{"id":2,"killed":false,"exitCode":5}]`)
	if r := h.must("ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps after kill: %q", r.stdout)
	}
	r = h.run("kill", "1")
	if r.code != ExitError || !strings.Contains(r.stderr, "no process 1") || !strings.Contains(r.stderr, "agentbox ps") {
		t.Errorf("kill of a killed process: %v", r)
	}
	// IDs are reused from the highest live one.
	if r := h.must("spawn", "true"); r.stdout != "1\n" {
		t.Errorf("spawn after kill printed %q, want 1", r.stdout)
	}
}

func TestBackgroundOnStoppedSandbox(t *testing.T) {
	h := newHarness(t)
	h.must("spawn", "sleep", "30")
	h.must("sandbox", "stop", DefaultID)
	r := h.must("ps")
	if r.stdout != "ID  STATUS  COMMAND\n" || !strings.Contains(r.stderr, "not running") {
		t.Errorf("ps of a stopped sandbox: %v", r)
	}
	if r := h.must("ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps --json of a stopped sandbox: %q", r.stdout)
	}
	if r := h.run("kill", "1"); r.code != ExitError || !strings.Contains(r.stderr, "not running") {
		t.Errorf("kill in a stopped sandbox: %v", r)
	}
	if st := h.e.state(h.e.defaultDir, DefaultID); st.info.Status != sandbox.StatusStopped {
		t.Errorf("ps or kill restarted the sandbox: %s", st.info.Status)
	}
}

func TestConcurrentSpawnsGetDistinctIDs(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "true") // create the sandbox first
	const n = 6
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out bytes.Buffer
			code := Run(context.Background(), Config{Engine: h.e, Stdout: &out, Getenv: func(string) string { return "" }}, []string{"spawn", "sleep", "30"})
			if code != 0 {
				t.Errorf("spawn %d: exit %d", i, code)
			}
			ids[i] = strings.TrimSpace(out.String())
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, p := range ids {
		if seen[p] {
			t.Errorf("ID %q given twice: %q", p, ids)
		}
		seen[p] = true
	}
}

func TestEnvErrorsNeverShowValues(t *testing.T) {
	_, err := parseEnv([]string{"OK=1", strings.Repeat("x-", 50) + "=secret"})
	if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), strings.Repeat("x-", 10)) {
		t.Errorf("err = %v", err)
	}
	env, err := parseEnv([]string{"A=", "B=c=d", "A=2"})
	if err != nil || len(env) != 2 || env["A"] != "2" || env["B"] != "c=d" {
		t.Errorf("env = %v, err = %v", env, err)
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"}, {30 * time.Second, "30s ago"}, {5 * time.Minute, "5m ago"},
		{3 * time.Hour, "3h ago"}, {72 * time.Hour, "3d ago"}, {-10 * time.Minute, "in 10m"},
	} {
		if got := ago(now, now.Add(-tt.d)); got != tt.want {
			t.Errorf("ago(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if ago(now, time.Time{}) != "-" {
		t.Error("zero time is not -")
	}
}

// brokenWriter accepts limit bytes, then fails with err.
type brokenWriter struct {
	limit int
	err   error
}

func (w *brokenWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, w.err
	}
	w.limit -= len(p)
	return len(p), nil
}

func TestExecOutputClosed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"EPIPE", syscall.EPIPE, ExitBrokenPipe, ""},
		{"other", errors.New("disk full"), ExitExecFailed, "writing the command's standard output: disk full"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEngine(t)
			var stderr bytes.Buffer
			start := time.Now()
			code := Run(context.Background(), Config{
				Engine: e, Stdout: &brokenWriter{limit: 10, err: tt.err}, Stderr: &stderr,
				Getenv: func(string) string { return "" },
			}, []string{"exec", "--", "yes"})
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) || tt.stderr == "" && stderr.Len() > 0 {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", code, stderr.String(), tt.code, tt.stderr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the command ran on for %v after its output closed", d)
			}
		})
	}
}

// jsonError parses the one JSON error object out holds.
func jsonError(t *testing.T, out string) errorEvent {
	t.Helper()
	var e errorEvent
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() || e.Type != "error" || e.Code == "" || e.Message == "" || !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("not one JSON error line: %v: %q", err, out)
	}
	return e
}

// TestNetworkAndPorts: sandbox network changes the policy and prints it;
// ports publish, ls and rm manage published ports.
func TestNetworkAndPorts(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "true")
	if r := h.must("sandbox", "network", "default"); !strings.Contains(r.stdout, "the public internet only") {
		t.Errorf("network: %s", r.stdout)
	}
	r := h.must("sandbox", "network", "default", "--allow-cidr", "203.0.113.0/24", "--allow-domain", "example.com")
	if !strings.Contains(r.stdout, "listed address ranges only") || !strings.Contains(r.stdout, "203.0.113.0/24") || !strings.Contains(r.stdout, "example.com") {
		t.Errorf("network --allow-cidr --allow-domain: %s", r.stdout)
	}
	if r := h.must("--json", "sandbox", "network", "default", "--block-all"); !strings.Contains(r.stdout, `"mode": "blocked"`) {
		t.Errorf("network --block-all --json: %s", r.stdout)
	}
	if r := h.run("sandbox", "network", "default", "--block-all", "--default"); r.code != ExitUsage || !strings.Contains(r.stderr, "give one of them") {
		t.Errorf("two policies: %v", r)
	}
	if r := h.run("sandbox", "network", "nope", "--default"); r.code == 0 || !strings.Contains(r.stderr, `no sandbox "nope"`) {
		t.Errorf("unknown sandbox: %v", r)
	}
	if r := h.must("ports", "publish", "default", "0:3000"); r.stdout != "127.0.0.1:40000 -> 3000\n" {
		t.Errorf("publish: %q", r.stdout)
	}
	h.must("ports", "publish", "default", "8080")
	if r := h.must("ports", "ls", "default"); !strings.Contains(r.stdout, "127.0.0.1:8080") || !strings.Contains(r.stdout, "3000") {
		t.Errorf("ls: %s", r.stdout)
	}
	if r := h.must("sandbox", "info", "default"); !strings.Contains(r.stdout, "127.0.0.1:8080 -> 8080") {
		t.Errorf("info: %s", r.stdout)
	}
	h.must("ports", "rm", "default", "8080")
	if r := h.must("--json", "ports", "ls", "default"); strings.Contains(r.stdout, "8080") {
		t.Errorf("ls after rm: %s", r.stdout)
	}
	for _, bad := range []string{"x", "80:0", "70000", "1:2:3"} {
		if r := h.run("ports", "publish", "default", bad); r.code != ExitUsage {
			t.Errorf("publish %s: %v", bad, r)
		}
	}
}

// TestEngineSelection: --engine, else AGENTBOX_ENGINE, picks the engine of
// every command; "local" is the default one; an unknown name is a usage
// error that lists the engines.
func TestEngineSelection(t *testing.T) {
	def, other := newFakeEngine(t), newFakeEngine(t)
	run := func(env map[string]string, args ...string) result {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), Config{
			Engine: def, Engines: map[string]Engine{"other": other},
			Stdout: &stdout, Stderr: &stderr,
			Getenv: func(k string) string { return env[k] },
		}, args)
		return result{code, stdout.String(), stderr.String()}
	}
	ids := func(e *fakeEngine) []string {
		t.Helper()
		infos, err := e.List(context.Background(), e.defaultDir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range infos {
			out = append(out, in.ID)
		}
		slices.Sort(out)
		return out
	}
	if r := run(nil, "--engine", "other", "exec", "--id", "by-flag", "--", "true"); r.code != 0 {
		t.Fatalf("exec --engine other: %v", r)
	}
	if r := run(map[string]string{EngineEnv: "other"}, "exec", "--id", "by-env", "--", "true"); r.code != 0 {
		t.Fatalf("exec with %s=other: %v", EngineEnv, r)
	}
	if r := run(map[string]string{EngineEnv: "other"}, "--engine", "local", "exec", "--id", "flag-wins", "--", "true"); r.code != 0 {
		t.Fatalf("exec --engine local: %v", r)
	}
	if got := ids(other); !slices.Equal(got, []string{"by-env", "by-flag"}) {
		t.Errorf("the other engine has %v, want by-env and by-flag", got)
	}
	if got := ids(def); !slices.Equal(got, []string{"flag-wins"}) {
		t.Errorf("the default engine has %v, want flag-wins", got)
	}
	r := run(nil, "--engine", "nope", "sandbox", "ls")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `unknown engine "nope": this agentbox has local, other`) {
		t.Errorf("an unknown engine: %v, want a usage error listing local, other", r)
	}
}
