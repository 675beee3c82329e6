package sandboxtest

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// testFork checks, for a sandbox that implements sandbox.Forker, that a
// fork has the files written before it, that writes after it on either
// side are not seen by the other, that the source keeps running (a
// background process started before is still alive), and that destroying
// the fork leaves the source intact.
func (s *suite) testFork(t *testing.T) {
	sb := s.newSandbox(t)
	forker, ok := sb.(sandbox.Forker)
	if !ok {
		t.Log("the sandbox does not implement sandbox.Forker: nothing to check")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	dir := s.opts.ScratchParent + "/sandboxtest-fork"
	pid := strings.TrimSpace(mustExec(t, ctx, sb, "mkdir -p "+dir+" && echo before > "+dir+"/f && (setsid nohup sleep 600 >/dev/null 2>&1 & echo $!)"))
	fork, err := forker.Fork(ctx, sandbox.ForkOptions{})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	defer func() { _ = fork.Destroy(context.WithoutCancel(ctx)) }()
	if fork.ID() == sb.ID() {
		t.Fatalf("the fork has the source's id %s", sb.ID())
	}
	if got := mustExec(t, ctx, fork, "cat "+dir+"/f"); got != "before\n" {
		t.Errorf("the fork reads %q from the file written before the fork, want %q", got, "before\n")
	}
	mustExec(t, ctx, sb, "echo source > "+dir+"/s")
	mustExec(t, ctx, fork, "echo fork > "+dir+"/k && echo changed > "+dir+"/f")
	if got := mustExec(t, ctx, fork, "ls "+dir); got != "f\nk\n" {
		t.Errorf("the fork's folder after writes on both sides: %q, want only its own files f and k", got)
	}
	if got := mustExec(t, ctx, sb, "ls "+dir+"; cat "+dir+"/f"); got != "f\ns\nbefore\n" {
		t.Errorf("the source's folder after writes on both sides: %q, want its own files f (unchanged) and s", got)
	}
	if res, err := sb.ExecuteCommand(ctx, "kill -0 "+pid, nil, nil); err != nil || res.ExitCode != 0 {
		t.Errorf("the source's background process %s after the fork: %+v %v, want it alive", pid, res, err)
	}
	if err := fork.Destroy(ctx); err != nil {
		t.Fatalf("destroy the fork: %v", err)
	}
	if got := mustExec(t, ctx, sb, "cat "+dir+"/f && kill -0 "+pid+" && echo alive"); got != "before\nalive\n" {
		t.Errorf("the source after the fork's destruction: %q, want its file and its process", got)
	}
	mustExec(t, ctx, sb, "kill "+pid)
}

// mustExec runs command in sb and returns its stdout, failing t unless it
// exits 0.
func mustExec(t *testing.T, ctx context.Context, sb sandbox.Sandbox, command string) string {
	t.Helper()
	res := mustRun(ctx, t, sb, command, nil, nil)
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d, stderr %q", command, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}
