package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// failingEngine is a fakeEngine whose next creates or stops fail (as many
// as the counters say), which puts sandboxes in the error state.
type failingEngine struct {
	*fakeEngine
	creates, stops atomic.Int32
}

var errInjected = errors.New("injected failure")

func (e *failingEngine) create(id string, sp spec) (func(context.Context) (sizes, error), error) {
	start, err := e.fakeEngine.create(id, sp)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (sizes, error) {
		if e.creates.Add(-1) >= 0 {
			return sizes{}, errInjected
		}
		return start(ctx)
	}, nil
}

func (e *failingEngine) stop(ctx context.Context, id string) error {
	if e.stops.Add(-1) >= 0 {
		return errInjected
	}
	return e.fakeEngine.stop(ctx, id)
}

// erroredByCreate returns a harness and a sandbox whose create failed:
// in the error state, with no sandbox in the engine.
func erroredByCreate(t *testing.T) (*harness, *failingEngine, apiSandbox) {
	eng := &failingEngine{fakeEngine: newFakeEngine(t)}
	eng.creates.Store(1)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "broken", "env": map[string]string{"GREETING": "hello"}})
	h.waitState(sb.ID, stateError)
	return h, eng, sb
}

func TestStartRecreatesSandboxWhoseCreateFailed(t *testing.T) {
	h, eng, sb := erroredByCreate(t)
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil); st != http.StatusOK {
		t.Fatalf("start of an error sandbox: %d, want 200", st)
	}
	got := h.waitState(sb.ID, stateStarted)
	if got.ErrorReason != "" {
		t.Errorf("errorReason after the recovery: %q", got.ErrorReason)
	}
	eng.mu.Lock()
	b := eng.boxes[sb.ID]
	eng.mu.Unlock()
	if b == nil || b.srv == nil || b.env["GREETING"] != "hello" {
		t.Fatalf("the engine's sandbox after the recovery: %+v, want running with the record's env", b)
	}
}

func TestStartOfErrorSandboxKeepsItsFiles(t *testing.T) {
	eng := &failingEngine{fakeEngine: newFakeEngine(t)}
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "kept"})
	h.waitState(sb.ID, stateStarted)
	eng.stops.Store(1)
	h.call("POST", "/sandbox/"+sb.ID+"/stop", nil, nil)
	h.waitState(sb.ID, stateError)
	creates := eng.called("create")
	if st := h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil); st != http.StatusOK {
		t.Fatalf("start of an error sandbox: %d, want 200", st)
	}
	h.waitState(sb.ID, stateStarted)
	if n := eng.called("create"); n != creates {
		t.Fatalf("the engine created the sandbox again (%d creates, was %d): its files would be lost", n, creates)
	}
}

func TestRecoverSkipStartLeavesSandboxStopped(t *testing.T) {
	h, eng, sb := erroredByCreate(t)
	if st := h.call("POST", "/sandbox/"+sb.ID+"/recover?skipStart=true", nil, nil); st != http.StatusOK {
		t.Fatalf("recover: %d, want 200", st)
	}
	h.waitState(sb.ID, stateStopped)
	if st, err := eng.status(context.Background(), sb.ID); err != nil || st.running {
		t.Fatalf("the engine's sandbox after recover?skipStart: %+v %v, want stopped", st, err)
	}
}

func TestRecoverRefusesSandboxNotInError(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{})
	sb := h.create(map[string]any{"name": "fine"})
	h.waitState(sb.ID, stateStarted)
	var e apiError
	if st := h.call("POST", "/sandbox/"+sb.ID+"/recover", nil, &e); st != http.StatusBadRequest {
		t.Fatalf("recover of a started sandbox: %d %+v, want 400", st, e)
	}
	if got, _ := h.get(sb.ID); got.State != stateStarted {
		t.Fatalf("after a refused recover: %q, want started", got.State)
	}
}

func TestDeleteOfErrorSandboxLeavesNothing(t *testing.T) {
	h, eng, sb := erroredByCreate(t)
	if st := h.call("DELETE", "/sandbox/"+sb.ID, nil, nil); st != http.StatusOK {
		t.Fatalf("delete of an error sandbox: %d", st)
	}
	h.waitState(sb.ID, "gone")
	if _, err := eng.status(context.Background(), sb.ID); !errNotFound(err) {
		t.Fatalf("the engine after the delete: %v, want not found", err)
	}
}

func TestRecoverCutByRestartIsResumed(t *testing.T) {
	h, eng, sb := erroredByCreate(t)
	release := eng.block("create")
	h.call("POST", "/sandbox/"+sb.ID+"/start", nil, nil)
	if got, _ := h.get(sb.ID); got.State != stateCreating {
		t.Fatalf("recovering a sandbox whose create failed: %q, want creating", got.State)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.s.Close(ctx) // gives up on the create held
	release()
	h2 := newHarness(t, eng, harnessOptions{stateDir: h.stateDir})
	h2.waitState(sb.ID, stateStarted)
}

// forkFailingEngine is a fakeEngine whose forks fail: the fork's record
// ends in the error state with no sandbox in the engine.
type forkFailingEngine struct{ *fakeEngine }

func (e forkFailingEngine) fork(srcID, newID, name string, env map[string]string) (func(context.Context) error, error) {
	if _, err := e.fakeEngine.fork(srcID, newID, name, env); err != nil {
		return nil, err
	}
	return func(context.Context) error { return errInjected }, nil
}

// TestRecoverOfLostForkMakesNoBlankSandbox: a fork the engine does not
// have cannot be recovered by creating a sandbox from its record (it
// would lack the source's files): the start fails, saying to fork again,
// and the engine creates nothing.
func TestRecoverOfLostForkMakesNoBlankSandbox(t *testing.T) {
	eng := forkFailingEngine{newFakeEngine(t)}
	h := newHarness(t, eng, harnessOptions{})
	src := h.create(map[string]any{"name": "source"})
	h.waitState(src.ID, stateStarted)
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/"+src.ID+"/fork", map[string]any{"name": "lost"}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d, want 200", st)
	}
	h.waitState(fork.ID, stateError)
	creates := eng.called("create")
	if st := h.call("POST", "/sandbox/"+fork.ID+"/start", nil, nil); st != http.StatusOK {
		t.Fatalf("start of the errored fork: %d, want 200", st)
	}
	got := h.waitState(fork.ID, stateError)
	if !strings.Contains(got.ErrorReason, "fork its source again") {
		t.Errorf("errorReason: %q, want one saying to fork again", got.ErrorReason)
	}
	if n := eng.called("create"); n != creates {
		t.Errorf("the engine created %d sandboxes for the recovery, want none", n-creates)
	}
	if st := h.call("DELETE", "/sandbox/"+fork.ID, nil, nil); st != http.StatusOK {
		t.Errorf("delete of the errored fork: %d, want 200", st)
	}
}
