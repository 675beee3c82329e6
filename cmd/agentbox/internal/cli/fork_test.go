package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// forkingEngine is the fake engine whose handles fork (sandbox.Forker):
// a fork is a new sandbox of the fake, its options recorded.
type forkingEngine struct {
	*fakeEngine
	forks []sandbox.ForkOptions
}

func (e *forkingEngine) Find(ctx context.Context, stateDir, id string) (Handle, error) {
	h, err := e.fakeEngine.Find(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return &forkingHandle{Handle: h, e: e, stateDir: stateDir}, nil
}

type forkingHandle struct {
	Handle
	e        *forkingEngine
	stateDir string
}

func (h *forkingHandle) Fork(ctx context.Context, opts sandbox.ForkOptions) (sandbox.Sandbox, error) {
	h.e.forks = append(h.e.forks, opts)
	if opts.ID == "" {
		opts.ID = "generated"
	}
	b, err := h.e.Open(ctx, OpenOptions{StateDir: h.stateDir, ID: opts.ID})
	if err != nil {
		return nil, err
	}
	return b, b.Detach(ctx)
}

// TestSandboxForkPrintsNewID: `sandbox fork ID NAME` forks through the
// handle's sandbox.Forker with NAME as the fork's id and name, and prints
// the fork's id.
func TestSandboxForkPrintsNewID(t *testing.T) {
	h := newHarness(t)
	e := &forkingEngine{fakeEngine: h.e}
	h.must("exec", "--id", "src", "true")
	var out strings.Builder
	code := Run(context.Background(), Config{Engine: e, Stdout: &out, Getenv: func(string) string { return "" }}, []string{"sandbox", "fork", "src", "copy"})
	if code != 0 || out.String() != "copy\n" {
		t.Fatalf("sandbox fork src copy: exit %d, stdout %q; want 0 and the fork's id", code, out.String())
	}
	if len(e.forks) != 1 || e.forks[0].ID != "copy" || e.forks[0].Name != "copy" {
		t.Errorf("fork options %+v, want ID and Name copy", e.forks)
	}
}

// TestSandboxForkUnsupported: an engine whose handles do not fork makes
// `sandbox fork` fail with a message naming the engine, creating nothing.
func TestSandboxForkUnsupported(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "src", "true")
	r := h.run("sandbox", "fork", "src", "copy")
	if r.code == 0 || !strings.Contains(r.stderr, "local engine cannot fork") {
		t.Errorf("sandbox fork on an engine without fork: %v, want a failure naming the engine", r)
	}
	if infos, _ := h.e.List(context.Background(), h.e.defaultDir); len(infos) != 1 {
		t.Errorf("sandboxes after the failed fork: %d, want 1", len(infos))
	}
}

// TestSandboxForkMissing: a fork of a sandbox that does not exist says so.
func TestSandboxForkMissing(t *testing.T) {
	h := newHarness(t)
	r := h.run("sandbox", "fork", "nosuch")
	if r.code == 0 || !strings.Contains(r.stderr, `no sandbox "nosuch"`) {
		t.Errorf("sandbox fork nosuch: %v, want no sandbox \"nosuch\"", r)
	}
}

// TestSandboxForkArgs: fork needs one or two arguments.
func TestSandboxForkArgs(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{{"sandbox", "fork"}, {"sandbox", "fork", "a", "b", "c"}} {
		if r := h.run(args...); r.code != ExitUsage {
			t.Errorf("%v: %v, want a usage error", args, r)
		}
	}
}
