package sandboxtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Helpers of the Processes and Reattach checks: spawning, waiting for and
// listing processes, and a second handle on a sandbox.

// spawn starts cmd through pm and kills it when t ends.
func (s *suite) spawn(t *testing.T, pm sandbox.ProcessManager, cmd string, opts *sandbox.ExecOptions) sandbox.Process {
	t.Helper()
	p, err := pm.Spawn(s.context(t), cmd, opts)
	if err != nil {
		t.Fatalf("Spawn(%q): %v", cmd, err)
	}
	if p.PID() == "" {
		t.Fatalf("Spawn(%q): empty PID", cmd)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		p.Kill(ctx)
	})
	return p
}

// wait waits up to 20s for p and fails the test on an error.
func (s *suite) wait(t *testing.T, p sandbox.Process) *sandbox.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.context(t), 20*time.Second)
	defer cancel()
	r, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait(%s %q): %v", p.PID(), p.Command(), err)
	}
	return r
}

// waitOutput waits up to 10s until p has retained stdout and stderr.
func waitOutput(t *testing.T, p sandbox.Process, stdout, stderr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; p.Stdout() != stdout || p.Stderr() != stderr; delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("retained output of process %s: %q / %q, want %q / %q", p.PID(), p.Stdout(), p.Stderr(), stdout, stderr)
		}
		time.Sleep(delay)
	}
}

// listed returns the entry of pid in pm's List, or nil.
func listed(ctx context.Context, t *testing.T, pm sandbox.ProcessManager, pid string) *sandbox.ProcessInfo {
	t.Helper()
	list, err := pm.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(list, func(pi sandbox.ProcessInfo) bool { return pi.PID == pid })
	if i < 0 {
		return nil
	}
	return &list[i]
}

// reopen returns a second handle on sb (Options.Reopen), closed when t
// ends.
func (s *suite) reopen(t *testing.T, sb sandbox.Sandbox) sandbox.Sandbox {
	t.Helper()
	other, err := s.opts.Reopen(sb)
	if err != nil {
		t.Fatalf("Reopen: %v", err)
	}
	if other == nil || other.ID() != sb.ID() {
		t.Fatalf("Reopen returned %v; want a handle on sandbox %q", other, sb.ID())
	}
	if c, ok := other.(interface{ Close(context.Context) error }); ok {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
			defer cancel()
			if err := c.Close(ctx); err != nil {
				t.Errorf("Close of the second handle: %v", err)
			}
		})
	}
	return other
}

// closeStdin closes p's stdin and reports true or, on an engine without
// CloseStdin (Options.NoCloseStdin), checks that it fails with an error
// matching ErrUnsupported and reports false.
func (s *suite) closeStdin(ctx context.Context, t *testing.T, p sandbox.Process) bool {
	t.Helper()
	err := p.CloseStdin(ctx)
	if s.opts.NoCloseStdin {
		if !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("CloseStdin on an engine without it: err = %v, want ErrUnsupported", err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	return true
}
