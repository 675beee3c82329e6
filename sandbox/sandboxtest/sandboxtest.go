// Package sandboxtest is the conformance suite every agentbox engine must
// pass, in the spirit of testing/fstest: an engine's tests call [Run] with a
// factory of fresh sandboxes, and the suite checks, through the
// [sandbox.Sandbox] interface alone, the behaviour the contract promises:
// argument quoting, exit codes, separate and streamed output, working
// directory and environment precedence, timeouts and kills that take the
// whole process tree (background children in the command's process group,
// children that left it with setsid, and nohup'd ones: each must be gone,
// checked with kill -0 inside the sandbox), standard input, large and
// binary output, concurrency, lifecycle transitions and process
// management, including reattaching to a process from a second handle
// (Options.Reopen). The engine needs setsid and nohup in its PATH.
//
// A typical engine test:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
//			sb, err := myengine.New(myengine.Options{...})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return sb // the suite destroys it when the subtest ends
//		}, sandboxtest.Options{PersistentFiles: true})
//	}
package sandboxtest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Options describes what an engine offers beyond the required contract, and
// tunes the suite.
type Options struct {
	// PersistentFiles claims that files written in the sandbox survive Stop
	// and Start.
	PersistentFiles bool
	// BinaryStdin claims that ExecOptions.Stdin carries any bytes, not only
	// UTF-8 text (the Daytona toolbox protocol sends input as JSON strings).
	BinaryStdin bool
	// NoCloseStdin says Process.CloseStdin is not offered; it must then fail
	// with an error matching sandbox.ErrUnsupported.
	NoCloseStdin bool
	// NoStdinReader says ExecOptions.Stdin (exact input from a reader, with
	// its end) is not offered, as on Daytona's own toolbox, whose input
	// gets a newline appended and cannot be closed: ExecuteCommand and
	// Spawn given a Stdin must then fail, before running anything, with an
	// error matching sandbox.ErrUnsupported. A command without Stdin must
	// still read an empty input.
	NoStdinReader bool
	// LineOutput says output passes through a line reader, as on Daytona's
	// own toolbox: a stream's last line that lacks a newline gets one when
	// the command ends, and NUL bytes are dropped. The suite then expects
	// every output so changed (see [LineOutput]) instead of byte for byte.
	LineOutput bool
	// ScratchParent is a writable folder inside the sandbox under which the
	// suite makes its scratch folders; default "/tmp".
	ScratchParent string
	// Timeout bounds each subtest; default 60s.
	Timeout time.Duration
	// Reopen returns another handle on sb that shares nothing in memory
	// with it, as another process would open it (for the local engine,
	// local.New with sb's state dir and id). The suite releases the handle
	// when its subtest ends with its Close(context.Context) error method,
	// if it has one, which must not stop the sandbox. With Reopen the suite
	// checks that a background process spawned through one handle is
	// listed, read, waited for, fed and killed through another, and, for a
	// handle with a Detach(context.Context) error method, that Detach
	// leaves its processes running; without it those checks skip.
	Reopen func(sb sandbox.Sandbox) (sandbox.Sandbox, error)
}

// Run runs the conformance suite as subtests of t, grouped as Lifecycle,
// Exec, Processes, Shutdown and Pause (for a sandbox.Pauser; select them with go test -run, e.g.
// -run 'Conformance/Exec/Timeout'). factory returns a new sandbox, in
// status pending, each time it is called; the suite destroys every sandbox
// it got when the subtest that asked for it ends, and fails if Destroy
// fails. A sandbox with a SetEnv method (engines embedding
// *sandbox.Lifecycle have it) also gets the environment-overlay checks.
func Run(t *testing.T, factory func(t *testing.T) sandbox.Sandbox, opts Options) {
	t.Helper()
	if opts.ScratchParent == "" {
		opts.ScratchParent = "/tmp"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	s := &suite{factory: factory, opts: opts}

	t.Run("Lifecycle", s.testLifecycle)
	t.Run("Exec", s.testExec)
	t.Run("Processes", s.testProcesses)
	t.Run("Shutdown", s.testShutdown)
	t.Run("Fork", s.testFork)
	t.Run("Pause", s.testPause)
}

// check is one property the suite checks, in a function of its own (as
// testing/fstest does); a group runs its checks as subtests, so that one
// failure does not hide the others.
type check struct {
	name string
	run  func(t *testing.T)
}

// runChecks runs each check as a subtest of t.
func runChecks(t *testing.T, checks []check) {
	for _, c := range checks {
		t.Run(c.name, c.run)
	}
}

type suite struct {
	factory func(t *testing.T) sandbox.Sandbox
	opts    Options
}

// newSandbox returns a fresh sandbox destroyed when t ends.
func (s *suite) newSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb := s.factory(t)
	if sb == nil {
		t.Fatal("sandboxtest: factory returned nil")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		if st := sb.Status(); st != sandbox.StatusDestroyed {
			t.Errorf("status after Destroy = %q, want %q", st, sandbox.StatusDestroyed)
		}
	})
	return sb
}

// context returns a context bounded by the suite's timeout, cancelled when
// t ends.
func (s *suite) context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// scratch makes a scratch folder in sb, removed when t ends (before the
// sandbox is destroyed).
func (s *suite) scratch(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	ctx := s.context(t)
	r := mustRun(ctx, t, sb, "mktemp -d", []string{s.opts.ScratchParent + "/sandboxtest.XXXXXXXX"}, nil)
	dir := strings.TrimSpace(r.Stdout)
	if r.ExitCode != 0 || !strings.HasPrefix(dir, "/") {
		t.Fatalf("mktemp -d in %s: exit %d, stdout %q, stderr %q", s.opts.ScratchParent, r.ExitCode, r.Stdout, r.Stderr)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		if st := sb.Status(); st == sandbox.StatusDestroyed {
			return
		}
		if _, err := sb.ExecuteCommand(ctx, "rm -rf", []string{dir}, nil); err != nil {
			t.Logf("removing scratch folder %s: %v", dir, err)
		}
	})
	return dir
}

// mustRun runs a command and fails the test on an error (not on a non-zero
// exit code).
func mustRun(ctx context.Context, t *testing.T, sb sandbox.Sandbox, command string, args []string, opts *sandbox.ExecOptions) *sandbox.CommandResult {
	t.Helper()
	r, err := sb.ExecuteCommand(ctx, command, args, opts)
	if err != nil {
		t.Fatalf("ExecuteCommand(%q, %q): %v", command, args, err)
	}
	if r == nil {
		t.Fatalf("ExecuteCommand(%q, %q) returned a nil result and no error", command, args)
	}
	return r
}

// LineOutput returns out as an engine with Options.LineOutput delivers it:
// without NUL bytes, and a last line that lacks a newline ended by one.
func LineOutput(out string) string {
	out = strings.ReplaceAll(out, "\x00", "")
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// out returns the output expected where a command writes want: want
// itself, or LineOutput(want) with Options.LineOutput.
func (s *suite) out(want string) string {
	if s.opts.LineOutput {
		return LineOutput(want)
	}
	return want
}

// mustSucceed runs a command and fails the test unless it exits with 0.
func mustSucceed(ctx context.Context, t *testing.T, sb sandbox.Sandbox, command string, args ...string) string {
	t.Helper()
	r := mustRun(ctx, t, sb, command, args, nil)
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q", r.Command, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// aliveScript prints "alive" if the process whose pid is in the file $0
// exists, is not a zombie and still runs sleep (every process the suite
// tracks by pid file is a sleep: after a restart the pid may belong to
// another process of the new sandbox), "dead" otherwise, and "nopid" when
// the file holds no pid.
const aliveScript = `p=$(cat "$0" 2>/dev/null); if [ -z "$p" ]; then echo nopid; exit; fi
if ! kill -0 "$p" 2>/dev/null; then echo dead; exit; fi
s=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' /proc/"$p"/status 2>/dev/null)
c=$(tr '\000' ' ' < /proc/"$p"/cmdline 2>/dev/null)
case "$s:$c" in Z:*|*:) echo dead ;; *:"sleep "*) echo alive ;; *) echo dead ;; esac`

// waitPIDFile waits until the pid file exists and is non-empty.
func waitPIDFile(ctx context.Context, t *testing.T, sb sandbox.Sandbox, pidFile string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := mustRun(ctx, t, sb, "test -s", []string{pidFile}, nil)
		if r.ExitCode == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %s never appeared", pidFile)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// treeScript returns a shell script that starts three background children
// that must all die when the command is killed, and the files their pids
// go to (prefix.group.pid, prefix.setsid.pid, prefix.nohup.pid): one in the
// command's process group (sleep 30 &), one that left it for a session of
// its own (setsid), and one that ignores SIGHUP (nohup). The script returns
// once all three pid files are written; killing only the command's process
// group, or hanging up on it, leaves the last two running. Each child
// writes its own pid ($$ before exec), so the pid is the sleeping
// process's whether or not setsid forks.
func treeScript(prefix string) (script string, pidFiles []string) {
	group, sess, hup := prefix+".group.pid", prefix+".setsid.pid", prefix+".nohup.pid"
	q := sandbox.ShellQuote
	script = "sleep 30 & echo $! > " + q(group) + "\n" +
		"setsid sh -c " + q("echo $$ > "+q(sess)+"; exec sleep 31") + " </dev/null >/dev/null 2>&1 &\n" +
		"nohup sh -c " + q("echo $$ > "+q(hup)+"; exec sleep 32") + " </dev/null >/dev/null 2>&1 &\n" +
		"while ! [ -s " + q(sess) + " ] || ! [ -s " + q(hup) + " ]; do sleep 0.01; done\n"
	return script, []string{group, sess, hup}
}

// assertAllGone is assertGone for each pid file.
func assertAllGone(ctx context.Context, t *testing.T, sb sandbox.Sandbox, pidFiles []string) {
	t.Helper()
	for _, f := range pidFiles {
		assertGone(ctx, t, sb, f)
	}
}

// assertGone fails unless the process whose pid is in pidFile ends within a
// few seconds, checked inside the sandbox with kill -0.
func assertGone(ctx context.Context, t *testing.T, sb sandbox.Sandbox, pidFile string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := mustRun(ctx, t, sb, "sh -c "+sandbox.ShellQuote(aliveScript), []string{pidFile}, nil)
		switch strings.TrimSpace(r.Stdout) {
		case "dead":
			return
		case "nopid":
			t.Fatalf("no pid in %s: the background child never started", pidFile)
		}
		if time.Now().After(deadline) {
			p := mustRun(ctx, t, sb, "cat", []string{pidFile}, nil)
			t.Fatalf("background child %s (pid %s) still alive 5s after its command ended: the process tree was not killed", pidFile, strings.TrimSpace(p.Stdout))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// envSetter is implemented by engines that embed *sandbox.Lifecycle.
type envSetter interface {
	SetEnv(update func(env map[string]string) map[string]string) error
}

// quotingArgs are awkward arguments that must reach the command unchanged.
var quotingArgs = []string{
	"plain",
	"hello world",
	"it's",
	`"double quoted"`,
	`$HOME and ${PATH} and $(id) and ` + "`id`",
	`back\slash\\ and \n literally`,
	"line one\nline two\n",
	"tab\there",
	"unicode ✓ é 日本語 🚀",
	"",
	"  leading and trailing  ",
	"*.go ? [a-z]",
	"a;b|c&d>e<f",
	"--not-a-flag",
	"-n",
	"'",
	"''",
	`'\''`,
	"~",
	"#comment",
	"=",
	"/srv/app:8080@host",
}

func sortedUnique(xs []string) bool {
	c := slices.Clone(xs)
	slices.Sort(c)
	return len(slices.Compact(c)) == len(xs)
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func itoa(i int) string { return strconv.Itoa(i) }
