package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// streamWriter collects what a sandbox streams, signals the first byte, and
// notices concurrent writes, which the contract forbids.
type streamWriter struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	writes     int
	first      chan struct{}
	once       sync.Once
	inWrite    atomic.Int32
	concurrent atomic.Bool
}

func newStreamWriter() *streamWriter { return &streamWriter{first: make(chan struct{})} }

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.inWrite.Add(1) > 1 {
		w.concurrent.Store(true)
	}
	defer w.inWrite.Add(-1)
	w.mu.Lock()
	w.buf.Write(p)
	w.writes++
	w.mu.Unlock()
	if len(p) > 0 {
		w.once.Do(func() { close(w.first) })
	}
	return len(p), nil
}

func (w *streamWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// testSuite is what the Exec checks share: one running sandbox and a
// scratch folder in it.
type execSuite struct {
	*suite
	sb  sandbox.Sandbox
	dir string
}

// checks lists the Exec checks in the order they run.
func (s *execSuite) checks() []check {
	return []check{
		{"Echo", s.testEcho},
		{"Quoting", s.testQuoting},
		{"ExitCodes", s.testExitCodes},
		{"Stderr", s.testStderr},
		{"Streaming", s.testStreaming},
		{"CwdAndEnv", s.testCwdAndEnv},
		{"EnvOverlay", s.testEnvOverlay},
		{"Timeout", s.testTimeout},
		{"ContextCancel", s.testContextCancel},
		{"Stdin", s.testStdin},
		{"LargeOutput", s.testLargeOutput},
		{"BinaryOutput", s.testBinaryOutput},
		{"MaxRetainedBytes", s.testMaxRetainedBytes},
		{"Concurrent", s.testConcurrent},
	}
}

// testExec runs every Exec check against one running sandbox.
func (s *suite) testExec(t *testing.T) {
	sb := s.newSandbox(t)
	ctx := s.context(t)
	if _, err := sb.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	e := &execSuite{suite: s, sb: sb, dir: s.scratch(t, sb)}
	runChecks(t, e.checks())
}

// testEcho checks a plain command: output, exit code, Command, Duration and no kill flags.
func (s *execSuite) testEcho(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	r := mustRun(ctx, t, sb, "echo", []string{"hello", "world"}, nil)
	if r.Stdout != "hello world\n" || r.Stderr != "" || r.ExitCode != 0 || !r.Success() {
		t.Fatalf("echo hello world = %+v", r)
	}
	if r.Command != "echo hello world" {
		t.Fatalf("Command = %q, want %q", r.Command, "echo hello world")
	}
	if r.Duration <= 0 {
		t.Fatalf("Duration = %v, want > 0", r.Duration)
	}
	if r.TimedOut || r.Killed {
		t.Fatalf("natural exit flagged TimedOut %v Killed %v", r.TimedOut, r.Killed)
	}
}

// testQuoting checks that awkward arguments reach the command unchanged while the command itself is a shell line.
func (s *execSuite) testQuoting(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	r := mustRun(ctx, t, sb, `printf '%s\n'`, quotingArgs, nil)
	want := strings.Join(quotingArgs, "\n") + "\n"
	if r.ExitCode != 0 || r.Stdout != want {
		t.Fatalf("printf of awkward args: exit %d, stderr %q\n got %q\nwant %q", r.ExitCode, r.Stderr, r.Stdout, want)
	}
	if wantCmd := sandbox.CommandLine(`printf '%s\n'`, quotingArgs); r.Command != wantCmd {
		t.Fatalf("Command = %q, want %q", r.Command, wantCmd)
	}
	// The command itself is not quoted: pipes and redirections work.
	r = mustRun(ctx, t, sb, "echo piped | tr a-z A-Z", nil, nil)
	if r.Stdout != "PIPED\n" {
		t.Fatalf("pipe in command: %q", r.Stdout)
	}
}

// testExitCodes checks exit codes, including exit in the command, which must not end the sandbox's next command.
func (s *execSuite) testExitCodes(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	for _, c := range []struct {
		cmd  string
		args []string
		code int
	}{
		{"true", nil, 0},
		{"false", nil, 1},
		{"sh -c", []string{"exit 42"}, 42},
		{"exit 3", nil, 3},
		{"exit 0", nil, 0},
		{"no-such-command-sandboxtest", nil, 127},
	} {
		r := mustRun(ctx, t, sb, c.cmd, c.args, nil)
		if r.ExitCode != c.code || r.Success() != (c.code == 0) {
			t.Errorf("%s: exit %d (success %v), want %d", r.Command, r.ExitCode, r.Success(), c.code)
		}
	}
	// exit in one command does not end the next.
	if got := mustSucceed(ctx, t, sb, "echo", "still here"); got != "still here\n" {
		t.Fatalf("after exit: %q", got)
	}
}

// testStderr checks that stdout and stderr are kept apart.
func (s *execSuite) testStderr(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	r := mustRun(ctx, t, sb, "echo out; echo err >&2; echo out2; sh -c 'echo err2 >&2; exit 5'", nil, nil)
	if r.Stdout != "out\nout2\n" || r.Stderr != "err\nerr2\n" || r.ExitCode != 5 {
		t.Fatalf("stdout %q stderr %q exit %d; want %q %q 5", r.Stdout, r.Stderr, r.ExitCode, "out\nout2\n", "err\nerr2\n")
	}
}

// testStreaming checks that output reaches the writers while the command runs, in order and without concurrent writes.
func (s *execSuite) testStreaming(t *testing.T) {
	sb, dir := s.sb, s.dir
	ctx := s.context(t)
	gate := dir + "/stream.go"
	stdout, stderr := newStreamWriter(), newStreamWriter()
	done := make(chan *sandbox.CommandResult, 1)
	errc := make(chan error, 1)
	cmd := "echo early; echo early-err >&2; while [ ! -e " + sandbox.ShellQuote(gate) + " ]; do sleep 0.02; done; echo late; echo late-err >&2"
	go func() {
		r, err := sb.ExecuteCommand(ctx, cmd, nil, &sandbox.ExecOptions{Stdout: stdout, Stderr: stderr})
		if err != nil {
			errc <- err
			return
		}
		done <- r
	}()
	for name, w := range map[string]*streamWriter{"stdout": stdout, "stderr": stderr} {
		select {
		case <-w.first:
		case err := <-errc:
			t.Fatalf("ExecuteCommand: %v", err)
		case r := <-done:
			t.Fatalf("command ended (%+v) before anything was streamed to %s", r, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing streamed to %s within 10s while the command runs", name)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("command ended before the gate opened: %+v", r)
	default:
	}
	if got := stdout.String(); got != "early\n" {
		t.Fatalf("streamed stdout before the gate = %q, want %q", got, "early\n")
	}
	mustSucceed(ctx, t, sb, "touch", gate)
	var r *sandbox.CommandResult
	select {
	case r = <-done:
	case err := <-errc:
		t.Fatalf("ExecuteCommand: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("command did not end after the gate opened")
	}
	if r.Stdout != "early\nlate\n" || r.Stderr != "early-err\nlate-err\n" {
		t.Fatalf("result stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	if stdout.String() != r.Stdout || stderr.String() != r.Stderr {
		t.Fatalf("streamed %q / %q differ from the result %q / %q", stdout.String(), stderr.String(), r.Stdout, r.Stderr)
	}
	if stdout.concurrent.Load() || stderr.concurrent.Load() {
		t.Fatal("concurrent writes to one writer")
	}
}

// testCwdAndEnv checks Cwd and per-call Env, which must not leak into the next command, and the error for a bad name.
func (s *execSuite) testCwdAndEnv(t *testing.T) {
	sb, dir := s.sb, s.dir
	ctx := s.context(t)
	sub := dir + "/dir with space"
	mustSucceed(ctx, t, sb, "mkdir -p", sub)
	r := mustRun(ctx, t, sb, "pwd", nil, &sandbox.ExecOptions{Cwd: sub})
	if strings.TrimSpace(r.Stdout) != sub {
		t.Fatalf("pwd with Cwd %q = %q", sub, r.Stdout)
	}
	if got := strings.TrimSpace(mustSucceed(ctx, t, sb, "pwd")); !strings.HasPrefix(got, "/") {
		t.Fatalf("default pwd = %q, want an absolute path", got)
	}
	awkward := "spaces and 'quotes' \"dq\" $HOME `x` \\ \n second line ✓"
	r = mustRun(ctx, t, sb, `printf '%s|%s' "$SBT_ONE" "$SBT_AWKWARD"`, nil, &sandbox.ExecOptions{
		Env: map[string]string{"SBT_ONE": "1", "SBT_AWKWARD": awkward},
	})
	if want := s.out("1|" + awkward); r.Stdout != want {
		t.Fatalf("env values: %q, want %q", r.Stdout, want)
	}
	// Per-call env does not leak into the next command.
	if got := mustSucceed(ctx, t, sb, `printf '%s' "${SBT_ONE-unset}"`); got != s.out("unset") {
		t.Fatalf("per-call env leaked into the next command: SBT_ONE=%q", got)
	}
	_, err := sb.ExecuteCommand(ctx, "echo", []string{"never"}, &sandbox.ExecOptions{Env: map[string]string{"BAD-NAME": "x"}})
	if !errors.Is(err, sandbox.ErrInvalidEnv) {
		t.Fatalf("invalid env name: err = %v, want ErrInvalidEnv", err)
	}
	if !strings.Contains(errText(err), "BAD-NAME") {
		t.Fatalf("invalid env error %q does not name the variable", err)
	}
}

// testEnvOverlay checks the sandbox's environment overlay against per-call Env (per-call wins), for commands and processes.
func (s *execSuite) testEnvOverlay(t *testing.T) {
	sb := s.sb
	setter, ok := sb.(envSetter)
	if !ok {
		t.Skipf("%T has no SetEnv (engines embedding *sandbox.Lifecycle have it)", sb)
	}
	ctx := s.context(t)
	if err := setter.SetEnv(func(env map[string]string) map[string]string {
		if env == nil {
			env = map[string]string{}
		}
		env["SBT_OVERLAY"] = "overlay"
		env["SBT_BOTH"] = "overlay"
		return env
	}); err != nil {
		t.Fatalf("SetEnv: %v", err)
	}
	t.Cleanup(func() {
		setter.SetEnv(func(env map[string]string) map[string]string {
			delete(env, "SBT_OVERLAY")
			delete(env, "SBT_BOTH")
			return env
		})
	})
	r := mustRun(ctx, t, sb, `printf '%s|%s|%s' "$SBT_OVERLAY" "$SBT_BOTH" "$SBT_CALL"`, nil, &sandbox.ExecOptions{
		Env: map[string]string{"SBT_BOTH": "call", "SBT_CALL": "call"},
	})
	if r.Stdout != s.out("overlay|call|call") {
		t.Fatalf("overlay vs per-call env: %q, want %q (per-call wins)", r.Stdout, "overlay|call|call")
	}
	p, err := sb.Processes().Spawn(ctx, `printf '%s|%s' "$SBT_OVERLAY" "$SBT_BOTH"`, &sandbox.ExecOptions{Env: map[string]string{"SBT_BOTH": "spawn"}})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Stdout != s.out("overlay|spawn") {
		t.Fatalf("spawned process env: %q, want %q", res.Stdout, "overlay|spawn")
	}
	err = setter.SetEnv(func(env map[string]string) map[string]string {
		env["not valid"] = "x"
		return env
	})
	if !errors.Is(err, sandbox.ErrInvalidEnv) {
		t.Fatalf("SetEnv with an invalid name: err = %v, want ErrInvalidEnv", err)
	}
}

// testTimeout checks that a timeout kills the whole process tree and reports 124, and that a negative timeout means none.
func (s *execSuite) testTimeout(t *testing.T) {
	sb, dir := s.sb, s.dir
	ctx := s.context(t)
	tree, pidFiles := treeScript(dir + "/timeout")
	start := time.Now()
	r := mustRun(ctx, t, sb, tree+"echo started; wait", nil,
		&sandbox.ExecOptions{Timeout: time.Second})
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("a 1s timeout returned after %v", el)
	}
	if r.ExitCode != sandbox.ExitTimedOut || !r.TimedOut || !r.Killed || r.Success() {
		t.Fatalf("timed-out command: exit %d TimedOut %v Killed %v; want 124 true true", r.ExitCode, r.TimedOut, r.Killed)
	}
	if r.Stdout != "started\n" {
		t.Fatalf("output before the timeout lost: stdout %q", r.Stdout)
	}
	assertAllGone(ctx, t, sb, pidFiles)

	// A negative timeout means none.
	r = mustRun(ctx, t, sb, "sleep 0.1; echo done", nil, &sandbox.ExecOptions{Timeout: -1})
	if r.ExitCode != 0 || r.TimedOut || r.Stdout != "done\n" {
		t.Fatalf("command without timeout: %+v", r)
	}
}

// testContextCancel checks that cancelling the context kills the whole process tree.
func (s *execSuite) testContextCancel(t *testing.T) {
	sb, dir := s.sb, s.dir
	tree, pidFiles := treeScript(dir + "/cancel")
	cctx, cancel := context.WithCancel(s.context(t))
	defer cancel()
	// Cancel once the whole tree runs (the script prints after its
	// children wrote their pid files).
	started := newStreamWriter()
	go func() {
		select {
		case <-started.first:
			cancel()
		case <-cctx.Done():
		}
	}()
	start := time.Now()
	_, err := sb.ExecuteCommand(cctx, tree+"echo started; wait", nil, &sandbox.ExecOptions{Stdout: started})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled command: err = %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("cancellation took %v", el)
	}
	assertAllGone(s.context(t), t, sb, pidFiles)
}

// testStdin checks that Stdin reaches the command and that no Stdin means an empty input.
func (s *execSuite) testStdin(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	in := "line 1\nline 2 ✓\n\x00 no newline at end"
	if s.opts.NoStdinReader {
		if _, err := sb.ExecuteCommand(ctx, "cat", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(in)}); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("Stdin on an engine without it: err = %v, want ErrUnsupported", err)
		}
	} else if r := mustRun(ctx, t, sb, "cat", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(in)}); r.Stdout != s.out(in) {
		t.Fatalf("cat of Stdin: %q, want %q", r.Stdout, s.out(in))
	}
	if s.opts.BinaryStdin && !s.opts.NoStdinReader {
		bin := string(allBytes())
		r := mustRun(ctx, t, sb, "cat", nil, &sandbox.ExecOptions{Stdin: strings.NewReader(bin)})
		if r.Stdout != s.out(bin) {
			t.Fatalf("cat of binary Stdin: %q", r.Stdout)
		}
	}
	// Without Stdin, the command reads an empty input and does not hang.
	r := mustRun(ctx, t, sb, "cat; echo eof", nil, &sandbox.ExecOptions{Timeout: 10 * time.Second})
	if r.TimedOut || r.Stdout != "eof\n" {
		t.Fatalf("cat without Stdin: %+v; want an immediate EOF", r)
	}
}

// testLargeOutput checks 8 MiB of output, both retained and streamed, byte for byte.
func (s *execSuite) testLargeOutput(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	const lines = 1 << 20 // 8 bytes each: 8 MiB
	stream := newStreamWriter()
	r := mustRun(ctx, t, sb, `awk 'BEGIN { for (i = 0; i < 1048576; i++) printf "%07d\n", i; print "to stderr" > "/dev/stderr" }'`, nil,
		&sandbox.ExecOptions{Stdout: stream})
	if r.ExitCode != 0 {
		t.Fatalf("awk: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	var want strings.Builder
	want.Grow(8 * lines)
	for i := range lines {
		fmt.Fprintf(&want, "%07d\n", i)
	}
	if r.Stdout != want.String() {
		t.Fatalf("8 MiB stdout corrupted: got %d bytes, want %d; first difference at byte %d", len(r.Stdout), want.Len(), firstDiff(r.Stdout, want.String()))
	}
	if stream.String() != r.Stdout {
		t.Fatalf("streamed 8 MiB differ from the result at byte %d", firstDiff(stream.String(), r.Stdout))
	}
	if r.Stderr != "to stderr\n" {
		t.Fatalf("stderr beside large stdout: %q", r.Stderr)
	}
}

// testBinaryOutput checks that every byte value survives on both streams.
func (s *execSuite) testBinaryOutput(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	var format strings.Builder
	all := allBytes()
	for i := range 256 {
		fmt.Fprintf(&format, `\%03o`, i)
	}
	q := sandbox.ShellQuote(format.String())
	stdout, stderr := newStreamWriter(), newStreamWriter()
	r := mustRun(ctx, t, sb, "printf "+q+"; printf "+q+" >&2", nil, &sandbox.ExecOptions{Stdout: stdout, Stderr: stderr})
	want := s.out(string(all))
	if r.Stdout != want {
		t.Fatalf("binary stdout: %q", r.Stdout)
	}
	if r.Stderr != want {
		t.Fatalf("binary stderr: %q", r.Stderr)
	}
	if stdout.String() != want || stderr.String() != want {
		t.Fatalf("streamed binary output differs: %q / %q", stdout.String(), stderr.String())
	}
}

// testMaxRetainedBytes checks that retention keeps the newest bytes, counts the dropped ones and rejects bad values.
func (s *execSuite) testMaxRetainedBytes(t *testing.T) {
	sb := s.sb
	ctx := s.context(t)
	r := mustRun(ctx, t, sb, `i=0; while [ $i -lt 100 ]; do printf '%04d\n' $i; i=$((i+1)); done`, nil,
		&sandbox.ExecOptions{MaxRetainedBytes: 50})
	if r.Stdout != "0090\n0091\n0092\n0093\n0094\n0095\n0096\n0097\n0098\n0099\n" {
		t.Fatalf("retained stdout %q, want the last 50 bytes", r.Stdout)
	}
	if r.StdoutDroppedBytes != 450 || !r.StdoutTruncated() || r.StderrTruncated() {
		t.Fatalf("dropped %d (truncated %v), want 450", r.StdoutDroppedBytes, r.StdoutTruncated())
	}
	_, err := sb.ExecuteCommand(ctx, "echo", []string{"never"}, &sandbox.ExecOptions{MaxRetainedBytes: -5})
	if !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("MaxRetainedBytes -5: err = %v, want ErrInvalidArgument", err)
	}
}

// testConcurrent checks concurrent commands: no output or environment crosses between them.
func (s *execSuite) testConcurrent(t *testing.T) {
	sb, dir := s.sb, s.dir
	ctx := s.context(t)
	const n, rounds = 8, 3
	for round := range rounds {
		var wg sync.WaitGroup
		got := make([]string, n)
		for i := range n {
			wg.Go(func() {
				v := fmt.Sprintf("value-%d", i)
				r, err := sb.ExecuteCommand(ctx, `printf '%s ' "$SBT_V"; sleep 0.1; printf '%s' "$SBT_V"; pwd >&2`, nil,
					&sandbox.ExecOptions{Env: map[string]string{"SBT_V": v}, Cwd: dir})
				if err != nil {
					got[i] = "error: " + err.Error()
					return
				}
				got[i] = r.Stdout + "|" + strings.TrimSpace(r.Stderr)
			})
		}
		wg.Wait()
		for i := range n {
			v := fmt.Sprintf("value-%d", i)
			if want := s.out(v+" "+v) + "|" + dir; got[i] != want {
				t.Errorf("round %d, command %d: %q, want %q (output or env crossed, or the end of the output was lost)", round, i, got[i], want)
			}
		}
	}
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// allBytes returns the 256 byte values in order.
func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}
