package sandboxtest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/internal/unisolated"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mutantEnv names the variable that makes TestMutant run the suite against
// a deliberately broken engine.
const mutantEnv = "SANDBOXTEST_MUTANT"

// mutant wraps a working sandbox and breaks one behaviour of ExecuteCommand.
type mutant struct {
	sandbox.Sandbox
	kind string
}

func (m *mutant) ExecuteCommand(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if m.kind == "group-kill-only" && opts != nil && opts.Timeout > 0 {
		return groupKillOnly(ctx, command, args, opts)
	}
	if m.kind == "no-quoting" && len(args) > 0 {
		command, args = command+" "+strings.Join(args, " "), nil
	}
	if m.kind == "env-ignored" && opts != nil {
		o := *opts
		o.Env = nil
		opts = &o
	}
	r, err := m.Sandbox.ExecuteCommand(ctx, command, args, opts)
	if err != nil {
		return r, err
	}
	switch m.kind {
	case "exit-codes-collapsed":
		if r.ExitCode != 0 {
			r.ExitCode = 1
		}
	case "stderr-merged":
		r.Stdout, r.Stderr = r.Stdout+r.Stderr, ""
	case "tail-lost":
		if len(r.Stdout) > 1<<20 {
			r.Stdout = r.Stdout[:len(r.Stdout)-1]
		}
	case "timeout-unflagged":
		r.TimedOut = false
	}
	return r, nil
}

// mutantTag is set in the environment of every command groupKillOnly
// starts, so that TestMutant can clean up the processes the mutant leaves.
const mutantTag = "SANDBOXTEST_MUTANT_TAG"

// groupKillOnly runs a command with a timeout the way a naive engine does
// (the unisolated engine shares the host, so the command can run right
// here): in a process group of its own, which the timeout kills with
// SIGKILL, and nothing else. Children that left the group (setsid) survive
// it. The command's output pipes are abandoned a moment after the kill, as
// such children may hold them.
func groupKillOnly(ctx context.Context, command string, args []string, opts *sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	line := sandbox.CommandLine(command, args)
	tctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "sh", "-c", line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Dir = opts.Cwd
	cmd.Env = append(os.Environ(), mutantTag+"="+os.Getenv(mutantTag))
	for k, v := range opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if opts.Stdin != nil {
		cmd.Stdin = opts.Stdin
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := &sandbox.CommandResult{Command: line, Stdout: stdout.String(), Stderr: stderr.String(), Duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case tctx.Err() != nil:
		r.ExitCode, r.TimedOut, r.Killed = sandbox.ExitTimedOut, true, true
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	case err != nil:
		return nil, err
	}
	return r, nil
}

// killTagged kills every process whose environment holds tag=value.
func killTagged(t *testing.T, value string) {
	want := []byte(mutantTag + "=" + value + "\x00")
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err == nil && bytes.Contains(env, want) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				t.Logf("killed pid %d left by the mutant", pid)
			}
		}
	}
}

// TestMutant runs part of the suite against a broken engine; it is run by
// TestSuiteCatchesMutants in a child process and skipped otherwise.
func TestMutant(t *testing.T) {
	kind := os.Getenv(mutantEnv)
	if kind == "" {
		t.Skip("runs only as the child of TestSuiteCatchesMutants")
	}
	if kind == "group-kill-only" {
		// The mutant leaves daemonised children behind on purpose.
		tag := strconv.Itoa(os.Getpid())
		t.Setenv(mutantTag, tag)
		t.Cleanup(func() { killTagged(t, tag) })
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		sb, err := unisolated.New(unisolated.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return &mutant{Sandbox: sb, kind: kind}
	}, sandboxtest.Options{PersistentFiles: true})
}

// The suite asserts behaviour: each broken engine fails the subtest meant
// to catch it.
func TestSuiteCatchesMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("inside a mutant run")
	}
	for _, c := range []struct{ kind, subtest, msg string }{
		{"no-quoting", "Exec/Quoting", ""},
		{"env-ignored", "Exec/CwdAndEnv", ""},
		{"exit-codes-collapsed", "Exec/ExitCodes", ""},
		{"stderr-merged", "Exec/Stderr", ""},
		{"tail-lost", "Exec/LargeOutput", ""},
		{"timeout-unflagged", "Exec/Timeout", ""},
		// An engine that kills only the command's process group on a
		// timeout misses children that called setsid.
		{"group-kill-only", "Exec/Timeout", "timeout.setsid.pid"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			parts := strings.Split(c.subtest, "/")
			pattern := "^TestMutant$/^" + parts[0] + "$/^" + parts[1] + "$"
			cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutantEnv+"="+c.kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed an engine with %s:\n%s", c.kind, out)
			}
			if want := "--- FAIL: TestMutant/" + c.subtest; !strings.Contains(string(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
			if c.msg != "" && !strings.Contains(string(out), c.msg) {
				t.Fatalf("the failure does not mention %q:\n%s", c.msg, out)
			}
		})
	}
}
