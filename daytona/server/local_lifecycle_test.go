package server

import (
	"net/http"
	"testing"
)

// TestLocalEngineFork forks a running local sandbox through serve: the
// fork runs, has the source's files and environment, and diverges.
func TestLocalEngineFork(t *testing.T) {
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{})
	src := h.started(map[string]any{"name": "src", "env": map[string]string{"GREETING": "hello"}})
	t.Cleanup(func() { h.deleteAndWait(src.ID) })
	h.run(src.ID, "echo one > /home/daytona/f")
	owner := h.run(src.ID, "stat -c %u:%g /home/daytona/f")
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/src/fork", map[string]any{"name": "child"}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d", st)
	}
	t.Cleanup(func() { h.deleteAndWait(fork.ID) })
	h.waitState(fork.ID, stateStarted)
	if got := h.run(fork.ID, `echo "$(cat /home/daytona/f) $GREETING"`); got != "one hello" {
		t.Fatalf("fork's file and env: %q, want %q", got, "one hello")
	}
	// The fork owns the files it got: it overwrites one, as its source's
	// user, and the source keeps its own.
	h.run(fork.ID, "echo two > /home/daytona/g; echo fork > /home/daytona/f")
	if got := h.run(fork.ID, "stat -c %u:%g /home/daytona/f; cat /home/daytona/f"); got != owner+"\nfork" {
		t.Fatalf("the fork's copy of a file its source wrote: %q, want owned by %s (as in the source) and overwritten", got, owner)
	}
	if got := h.run(src.ID, "cat /home/daytona/f; test -e /home/daytona/g || echo no-g"); got != "one\nno-g" {
		t.Fatalf("source after the fork wrote: %q", got)
	}
}

// deleteAndWait deletes sandbox id, if there, and waits until it is gone.
func (h *harness) deleteAndWait(id string) {
	h.t.Helper()
	if h.call("DELETE", "/sandbox/"+id, nil, nil) == http.StatusOK {
		h.waitState(id, "gone")
	}
}
