package sandboxtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

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

// TestMutant runs part of the suite against a broken engine; it is run by
// TestSuiteCatchesMutants in a child process and skipped otherwise.
func TestMutant(t *testing.T) {
	kind := os.Getenv(mutantEnv)
	if kind == "" {
		t.Skip("runs only as the child of TestSuiteCatchesMutants")
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
	for _, c := range []struct{ kind, subtest string }{
		{"no-quoting", "Exec/Quoting"},
		{"env-ignored", "Exec/CwdAndEnv"},
		{"exit-codes-collapsed", "Exec/ExitCodes"},
		{"stderr-merged", "Exec/Stderr"},
		{"tail-lost", "Exec/LargeOutput"},
		{"timeout-unflagged", "Exec/Timeout"},
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
		})
	}
}
