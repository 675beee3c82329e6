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
	var fork apiSandbox
	if st := h.call("POST", "/sandbox/src/fork", map[string]any{"name": "child"}, &fork); st != http.StatusOK {
		t.Fatalf("fork: %d", st)
	}
	t.Cleanup(func() { h.deleteAndWait(fork.ID) })
	h.waitState(fork.ID, stateStarted)
	if got := h.run(fork.ID, `echo "$(cat /home/daytona/f) $GREETING"`); got != "one hello" {
		t.Fatalf("fork's file and env: %q, want %q", got, "one hello")
	}
	h.run(fork.ID, "echo two > /home/daytona/g")
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
