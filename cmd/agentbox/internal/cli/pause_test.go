package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
)

// pausingEngine is the fake engine whose handles implement
// sandbox.Pauser, recording the calls.
type pausingEngine struct {
	*fakeEngine
	mu    sync.Mutex
	calls []string
}

func (e *pausingEngine) Find(ctx context.Context, stateDir, id string) (Handle, error) {
	h, err := e.fakeEngine.Find(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return &pausingHandle{Handle: h, e: e, id: id}, nil
}

type pausingHandle struct {
	Handle
	e  *pausingEngine
	id string
}

func (h *pausingHandle) record(what string) error {
	h.e.mu.Lock()
	h.e.calls = append(h.e.calls, what+" "+h.id)
	h.e.mu.Unlock()
	return nil
}

func (h *pausingHandle) Pause(context.Context) error  { return h.record("pause") }
func (h *pausingHandle) Resume(context.Context) error { return h.record("resume") }

// runWith runs args against engine e.
func runWith(e Engine, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), Config{Engine: e, Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}, args)
	return result{code, stdout.String(), stderr.String()}
}

// TestSandboxPauseResume: `sandbox pause` and `sandbox resume` call the
// handle's Pause and Resume, for each id, and report each.
func TestSandboxPauseResume(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "a", "true")
	h.must("exec", "--id", "b", "true")
	e := &pausingEngine{fakeEngine: h.e}
	if r := runWith(e, "sandbox", "pause", "a", "b"); r.code != 0 || r.stdout != "paused a\npaused b\n" {
		t.Fatalf("sandbox pause: %v", r)
	}
	if r := runWith(e, "sandbox", "resume", "a"); r.code != 0 || r.stdout != "resumed a\n" {
		t.Fatalf("sandbox resume: %v", r)
	}
	if got := strings.Join(e.calls, ","); got != "pause a,pause b,resume a" {
		t.Fatalf("calls %q", got)
	}
}

// TestSandboxPauseUnsupported: an engine whose handles cannot pause gets
// a usage error naming it.
func TestSandboxPauseUnsupported(t *testing.T) {
	h := newHarness(t)
	h.must("exec", "--id", "a", "true")
	r := h.run("sandbox", "pause", "a")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "engine local cannot pause") {
		t.Fatalf("sandbox pause on an engine without it: %v", r)
	}
}

// TestSandboxPauseMissing: pausing a sandbox that does not exist says so
// and pauses nothing.
func TestSandboxPauseMissing(t *testing.T) {
	h := newHarness(t)
	e := &pausingEngine{fakeEngine: h.e}
	r := runWith(e, "sandbox", "pause", "nope")
	if r.code != ExitError || !strings.Contains(r.stderr, `no sandbox "nope"`) || len(e.calls) != 0 {
		t.Fatalf("sandbox pause of a missing sandbox: %v, calls %q", r, e.calls)
	}
}
