package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/rodir"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestMain(m *testing.M) {
	local.Init() // the test binary is re-executed as the sandboxes' init
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

// result is the outcome of one agentbox invocation.
type result struct {
	code           int
	stdout, stderr string
}

// env is a temporary state dir whose sandboxes are all removed when the
// test ends.
type env struct {
	t        testing.TB
	stateDir string
}

func newEnv(t testing.TB) *env {
	e := &env{t: t, stateDir: t.TempDir()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		infos, err := local.List(ctx, e.stateDir)
		if err != nil {
			t.Errorf("list sandboxes to clean up: %v", err)
		}
		for _, in := range infos {
			if err := localtest.Destroy(ctx, e.stateDir, in.ID); err != nil {
				t.Errorf("remove sandbox %s: %v", in.ID, err)
			}
		}
	})
	return e
}

// run runs agentbox in-process against the local engine.
func (e *env) run(stdin string, args ...string) result {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	var in io.Reader // none, as when agentbox's stdin is a terminal or /dev/null
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	code := cli.Run(context.Background(), cli.Config{
		Engine:  localEngine{},
		Engines: engines(),
		Stdin:   in,
		Stdout:  &stdout,
		Stderr:  &stderr,
		Getenv:  func(string) string { return "" },
	}, append([]string{"--state-dir", e.stateDir}, args...))
	return result{code, stdout.String(), stderr.String()}
}

func (e *env) must(args ...string) result {
	e.t.Helper()
	r := e.run("", args...)
	if r.code != 0 {
		e.t.Fatalf("agentbox %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// process is an entry of "agentbox ps --json".
type process struct {
	ID       int    `json:"id"` // a number of agentbox's, not a PID
	Command  string `json:"command"`
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exitCode"`
}

// ps returns what "agentbox ps --json" lists.
func (e *env) ps() []process {
	e.t.Helper()
	r := e.must("ps", "--json")
	var procs []process
	if err := json.Unmarshal([]byte(r.stdout), &procs); err != nil {
		e.t.Fatalf("ps --json: %v: %q", err, r.stdout)
	}
	return procs
}

// waitExit waits until background process pid of the default sandbox
// has exited, through a handle of its own.
func (e *env) waitExit(pid string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := local.New(local.Options{StateDir: e.stateDir, ID: cli.DefaultID})
	if err != nil {
		e.t.Fatal(err)
	}
	defer sb.Detach(context.Background())
	p, err := sb.Processes().Attach(ctx, pid, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		e.t.Fatalf("wait for process %s: %v", pid, err)
	}
}

// count counts the processes of the default sandbox whose command line
// starts with prefix.
func (e *env) count(prefix string) int {
	e.t.Helper()
	r := e.must("exec", "--", "sh", "-c",
		`for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c "^$1" || true`, "sh", prefix)
	n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err != nil {
		e.t.Fatalf("count processes: %+v", r)
	}
	return n
}

func TestExecLocal(t *testing.T) {
	e := newEnv(t)
	r := e.run("", "exec", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3")
	if r.code != 3 || r.stdout != "hi\n" || r.stderr != "oops\n" {
		t.Fatalf("got %+v, want exit 3, hi, oops", r)
	}
	// Args are quoted, the command is not; env, cwd and stdin reach it.
	r = e.run("data in", "exec", "-i", "--env", "GREETING=hello there", "--cwd", "/tmp", "--",
		`printf '%s|' "$GREETING" "$(pwd)" "$(cat)"`, "a b", "c'd")
	if want := "hello there|/tmp|data in|a b|c'd|"; r.code != 0 || r.stdout != want {
		t.Errorf("got %+v, want stdout %q", r, want)
	}
	// The sandbox persisted between the two commands, and is isolated.
	r = e.must("exec", "--", "sh", "-c", "echo $$")
	if strings.TrimSpace(r.stdout) == "" {
		t.Errorf("no pid printed: %+v", r)
	}

	r = e.run("", "exec", "--timeout", "300ms", "--", "sleep", "20")
	if r.code != sandbox.ExitTimedOut || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("timeout: got %+v, want exit 124", r)
	}
	r = e.run("", "exec", "--json", "--", "sh", "-c", "echo out; exit 2")
	if s := parseEvents(t, r.stdout); r.code != 2 || s.last()["type"] != "exit" || s.last()["exitCode"] != float64(2) || string(s.stdout) != "out\n" {
		t.Errorf("--json: %+v", r)
	}
	// Without -i the command reads an empty input.
	if r := e.run("data in", "exec", "--", "wc", "-c"); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("exec without -i: %+v, want no input", r)
	}
	r = e.run("", "exec", "--id", "../evil", "--", "true")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "sandbox id") {
		t.Errorf("bad id: got %+v, want a usage error", r)
	}
	r = e.run("", "exec", "--env", "TOKEN", "--", "true")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "NAME=VALUE") {
		t.Errorf("--env without '=': %+v", r)
	}
}

func TestSandboxCommandsLocal(t *testing.T) {
	e := newEnv(t)
	e.must("exec", "--id", "one", "true")

	r := e.must("sandbox", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "one ") || !strings.Contains(lines[1], "running") {
		t.Errorf("ls: %q", r.stdout)
	}
	// ID, STATUS, CREATED, LAST USED: the sandbox was used just now.
	if f := strings.Fields(lines[len(lines)-1]); f[len(f)-1] == "-" {
		t.Errorf("ls shows no last use: %q", r.stdout)
	}
	var infos []sandbox.Info
	r = e.must("sandbox", "ls", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil || len(infos) != 1 || infos[0].ID != "one" || infos[0].Provider != "local" ||
		infos[0].LastUsedAt.IsZero() || !infos[0].TimeoutAt.Equal(infos[0].LastUsedAt.Add(local.DefaultAutoStopInterval)) {
		t.Errorf("ls --json: %v: %q", err, r.stdout)
	}
	r = e.must("sandbox", "info", "one")
	for _, want := range []string{"Status:", "running", "local", "Last used:", "Stops at:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info lacks %q: %q", want, r.stdout)
		}
	}
	r = e.run("", "sandbox", "info", "nope")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, `no sandbox "nope"`) {
		t.Errorf("info of an unknown id: %+v", r)
	}
	for _, verb := range []string{"stop", "rm"} {
		r = e.run("", "sandbox", verb, "nope")
		if r.code != cli.ExitError || !strings.Contains(r.stderr, `no sandbox "nope"`) {
			t.Errorf("%s of an unknown id: %+v", verb, r)
		}
	}
	r = e.run("", "sandbox", "info", "../x")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "sandbox id") {
		t.Errorf("info of an invalid id: %+v", r)
	}

	e.must("exec", "--id", "one", "--", "sh", "-c", "echo kept > ~/file")
	if r := e.must("sandbox", "stop", "one"); r.stdout != "stopped one\n" {
		t.Errorf("stop: %q", r.stdout)
	}
	if in, err := localtest.Lookup(context.Background(), e.stateDir, "one"); err != nil || in.Status != sandbox.StatusStopped {
		t.Errorf("after stop: %v, %v", in, err)
	}
	if r := e.must("exec", "--id", "one", "--", "cat ~/file"); r.stdout != "kept\n" {
		t.Errorf("file after stop and restart: %q", r.stdout)
	}
	if r := e.must("sandbox", "rm", "one"); r.stdout != "removed one\n" {
		t.Errorf("rm: %q", r.stdout)
	}
	if _, err := localtest.Lookup(context.Background(), e.stateDir, "one"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("lookup after rm: %v", err)
	}
}

func TestBackgroundLocal(t *testing.T) {
	e := newEnv(t)
	if r := e.must("spawn", "--", "sleep", "60"); r.stdout != "1\n" {
		t.Fatalf("spawn: %q", r.stdout)
	}
	if r := e.must("spawn", "--", "sh", "-c", "echo out; echo err >&2"); r.stdout != "2\n" {
		t.Fatalf("spawn: %q", r.stdout)
	}
	e.waitExit("2")
	procs := e.ps()
	if len(procs) != 2 || procs[0].ID != 1 || procs[1].ID != 2 || !procs[0].Running || procs[0].Command != "sleep 60" ||
		procs[1].Running || procs[1].ExitCode == nil || *procs[1].ExitCode != 0 {
		t.Fatalf("ps: %+v", procs)
	}
	r := e.must("ps")
	if !strings.Contains(r.stdout, "1   running     sleep 60") || !strings.Contains(r.stdout, "exited (0)") {
		t.Errorf("ps: %q", r.stdout)
	}
	if r := e.must("logs", "2"); r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("logs: %+v", r)
	}
	if r := e.must("kill", "1"); r.stdout != "killed 1\n" {
		t.Errorf("kill: %q", r.stdout)
	}
	if r := e.run("", "kill", "1"); r.code != cli.ExitError || !strings.Contains(r.stderr, "no process 1") {
		t.Errorf("second kill: %+v", r)
	}
	e.must("kill", "2")
	if r := e.must("ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps after kill: %q", r.stdout)
	}
	// The killed process is gone from the sandbox, not just forgotten.
	if n := e.count("sleep 60"); n != 0 {
		t.Errorf("sleep 60 still runs after kill (%d processes)", n)
	}
}

var (
	buildOnce sync.Once
	binDir    string // removed by TestMain
	binPath   string
	buildErr  error
)

// agentboxBinary builds the agentbox command once per test run. Tests
// that need it are skipped with -short.
func agentboxBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "agentbox-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "agentbox")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// binaryCommand returns the command running the built agentbox with args
// on stateDir.
func binaryCommand(t testing.TB, stateDir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(agentboxBinary(t), args...)
	cmd.Env = append(os.Environ(), cli.StateDirEnv+"="+stateDir)
	return cmd
}

// runBinary runs the built agentbox with args and returns its result.
func runBinary(t testing.TB, stateDir string, args ...string) result {
	t.Helper()
	cmd := binaryCommand(t, stateDir, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agentbox %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func TestBinaryEndToEnd(t *testing.T) {
	e := newEnv(t)
	r := runBinary(t, e.stateDir, "exec", "--", "sh", "-c", "echo hi; exit 3")
	if r.code != 3 || r.stdout != "hi\n" {
		t.Fatalf("exec: got %+v, want exit 3 and stdout \"hi\\n\"", r)
	}
	// A background process started by one agentbox process is reachable
	// from the next ones.
	if r := runBinary(t, e.stateDir, "spawn", "--", "sleep", "60"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("spawn: %+v", r)
	}
	if r := runBinary(t, e.stateDir, "ps"); r.code != 0 || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "1 running sleep 60") {
		t.Errorf("ps from a new process: %+v", r)
	}
	if r := runBinary(t, e.stateDir, "kill", "1"); r.code != 0 || r.stdout != "killed 1\n" {
		t.Errorf("kill from a new process: %+v", r)
	}
	if r := runBinary(t, e.stateDir, "exec", "--env", "1BAD=topsecret", "--", "true"); r.code != cli.ExitUsage || strings.Contains(r.stderr, "topsecret") {
		t.Errorf("bad --env: %+v", r)
	}
	if r := runBinary(t, e.stateDir, "sandbox", "rm", cli.DefaultID); r.code != 0 || r.stdout != "removed default\n" {
		t.Fatalf("sandbox rm: %+v", r)
	}
	if r := runBinary(t, e.stateDir, "sandbox", "info", cli.DefaultID); r.code != cli.ExitError {
		t.Errorf("info after rm: %+v", r)
	}
}

// TestBinaryInterrupt sends SIGINT to agentbox's whole process group, as a
// terminal's Ctrl-C does, during the exec that created the sandbox: the
// command ends, agentbox exits 130, and the sandbox survives.
func TestBinaryInterrupt(t *testing.T) {
	e := newEnv(t)
	cmd := binaryCommand(t, e.stateDir, "exec", "--", "sh", "-c", "echo started; exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_, stderr := startOutputting(t, cmd)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, "after SIGINT")
	if code := cmd.ProcessState.ExitCode(); code != cli.ExitInterrupted {
		t.Errorf("exit code %d, want 130; stderr %q", code, stderr.String())
	}
	if r := runBinary(t, e.stateDir, "exec", "--", "sh", "-c", "echo alive"); r.code != 0 || r.stdout != "alive\n" {
		t.Errorf("sandbox after the interrupt: %+v", r)
	}
	if n := e.count("sleep 60"); n != 0 {
		t.Errorf("the interrupted command still runs in the sandbox (%d processes)", n)
	}
}

// TestBinaryBrokenPipe closes agentbox's output pipe while the command
// writes (agentbox exec -- yes | head): agentbox exits 141 and the command
// does not run on in the sandbox.
func TestBinaryBrokenPipe(t *testing.T) {
	e := newEnv(t)
	cmd := binaryCommand(t, e.stateDir, "exec", "--", "sh", "-c", "exec yes broken-pipe-marker")
	stdout, stderr := startOutputting(t, cmd)
	stdout.Close()
	waitExit(t, cmd, "after its output closed")
	if code := cmd.ProcessState.ExitCode(); code != cli.ExitBrokenPipe {
		t.Errorf("exit code %d, want 141; stderr %q", code, stderr.String())
	}
	if n := e.count("yes broken-pipe-marker"); n != 0 {
		t.Errorf("the command still runs in the sandbox (%d processes)", n)
	}
}

// startOutputting starts cmd with its stdout piped and its stderr
// collected, and waits until it has written to stdout.
func startOutputting(t testing.TB, cmd *exec.Cmd) (io.ReadCloser, *bytes.Buffer) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdout.Read(make([]byte, 4)); err != nil {
		t.Fatalf("read: %v", err)
	}
	return stdout, &stderr
}

// waitExit waits for cmd to end; after 15s it kills it and fails the test,
// saying that agentbox did not exit <when>.
func waitExit(t testing.TB, cmd *exec.Cmd, when string) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("agentbox did not exit " + when)
	}
}

// BenchmarkExecBinary measures "agentbox exec -- true" (a new agentbox
// process per command, sandbox running) against os/exec of "true" in the
// same run; ratio is agentbox's time over os/exec's.
func BenchmarkExecBinary(b *testing.B) {
	e := newEnv(b)
	if r := runBinary(b, e.stateDir, "exec", "true"); r.code != 0 {
		b.Fatalf("warm-up: %+v", r)
	}
	benchAgainstTrue(b, func() {
		if out, err := binaryCommand(b, e.stateDir, "exec", "true").CombinedOutput(); err != nil {
			b.Fatalf("agentbox exec true: %v: %s", err, out)
		}
	})
}

// BenchmarkExecInProcess measures one "agentbox exec -- true" run in-process
// (command tree, engine open, command, close; no process start) against
// os/exec of "true" in the same run.
func BenchmarkExecInProcess(b *testing.B) {
	e := newEnv(b)
	if r := e.run("", "exec", "true"); r.code != 0 {
		b.Fatalf("warm-up: %+v", r)
	}
	benchAgainstTrue(b, func() {
		if r := e.run("", "exec", "true"); r.code != 0 {
			b.Fatalf("exec true: %+v", r)
		}
	})
}

// benchAgainstTrue runs op b.N times, each after an os/exec of "true" so
// that noise hits both alike, and reports both mean times and the ratio of
// op's time over os/exec's.
func benchAgainstTrue(b *testing.B, op func()) {
	var base, ours time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		op()
		base += t1.Sub(t0)
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "os/exec-ns/op")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "agentbox-ns/op")
	b.ReportMetric(float64(ours)/float64(base), "ratio")
}

func TestBadStateDirLocal(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, stateDir: file}
	r := e.run("", "exec", "--", "true")
	if r.code != cli.ExitExecFailed || !strings.Contains(r.stderr, "state dir "+file) {
		t.Errorf("exec with a file as state dir: %+v", r)
	}
	if r := e.run("", "sandbox", "ls"); r.code != cli.ExitError || !strings.Contains(r.stderr, file) {
		t.Errorf("ls with a file as state dir: %+v", r)
	}
}

// TestReadOnlyStateDirLocal checks that the local engine's error about an
// unwritable state dir reaches the user with the CLI's way to choose
// another, not the Go option of library users.
func TestReadOnlyStateDirLocal(t *testing.T) {
	ro := t.TempDir()
	existing := filepath.Join(ro, "existing")
	if err := os.Mkdir(existing, 0o700); err != nil {
		t.Fatal(err)
	}
	rodir.Make(t, existing)
	rodir.Make(t, ro)
	// A state dir to create, and one that exists but cannot be written.
	for _, stateDir := range []string{filepath.Join(ro, "new", "state"), existing} {
		e := &env{t: t, stateDir: stateDir} // no sandbox can be made: nothing to clean up
		for _, tt := range []struct {
			args []string
			code int
		}{
			{[]string{"exec", "--", "true"}, cli.ExitExecFailed},
			{[]string{"spawn", "--", "true"}, cli.ExitError},
		} {
			r := e.run("", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, "state dir "+stateDir+" is not writable") ||
				!strings.Contains(r.stderr, "pass --state-dir DIR or set "+cli.StateDirEnv) ||
				strings.Contains(r.stderr, "Options.StateDir") {
				t.Errorf("%s on %s: %+v, want exit %d telling to pass --state-dir or set %s", tt.args, stateDir, r, tt.code, cli.StateDirEnv)
			}
		}
		if infos, err := local.List(context.Background(), stateDir); err != nil || len(infos) != 0 {
			t.Errorf("sandboxes in %s: %v, %v", stateDir, infos, err)
		}
	}
}

func TestConcurrentSpawnLocal(t *testing.T) {
	e := newEnv(t)
	e.must("exec", "true")
	const n = 4
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := e.run("", "spawn", "--", "sleep", "60")
			if r.code != 0 {
				t.Errorf("spawn %d: %+v", i, r)
			}
			ids[i] = strings.TrimSpace(r.stdout)
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
	if procs := e.ps(); len(procs) != n {
		t.Errorf("ps --json: %+v, want %d processes", procs, n)
	}
}

func TestMCPBinary(t *testing.T) {
	e := newEnv(t)
	cmd := binaryCommand(t, e.stateDir, "mcp", "--id", "mcp", "--workdir", "/tmp/proj")
	cmd.Stderr = os.Stderr
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) < 12 {
		t.Fatalf("tools/list: %v, %v", list, err)
	}
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "pwd; sleep 300", "background": true}})
	if err != nil || res.IsError {
		t.Fatalf("background command: %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "pwd"}})
	if err != nil || res.IsError || res.Content[0].(*mcpsdk.TextContent).Text != "/tmp/proj\n" {
		t.Fatalf("pwd: %+v, %v", res, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	// The server left; the sandbox and its background process did not.
	r := e.must("ps", "--id", "mcp", "--json")
	var ps []process
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil || len(ps) != 1 || !ps[0].Running || !strings.Contains(ps[0].Command, "sleep 300") {
		t.Fatalf("processes after the server ended: %+v, %v", ps, err)
	}
}

func TestMCPRefusesOpenHTTPWithoutToken(t *testing.T) {
	e := newEnv(t)
	r := e.run("", "mcp", "--http", "0.0.0.0:0")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "without a token") {
		t.Fatalf("got %+v, want a usage error about the token", r)
	}
}
