package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Resizing (POST /sandbox/{id}/resize {cpu?, memory?, disk?}), with
// Daytona's rules: only a started or stopped sandbox; cpu and memory go
// down only while it is stopped; disk only grows, and only while it is
// stopped. The sandbox is "resizing" while the engine works, then back in
// its state; the answer shows it resized. What the engine cannot change
// it refuses with 501, saying so: the local engine changes the cpu and
// memory of stopped sandboxes (its limits apply at start), never the
// disk, whose size it fixes at creation.

// A resizer is an engine that changes the sizes of a sandbox.
type resizer interface {
	// checkResize refuses, with the client's error, changing a
	// sandbox's sizes from cur to the fields of want that are not 0,
	// which the engine cannot do (running: the sandbox is started).
	checkResize(cur, want sizes, running bool) error
	// resize gives sandbox id the sizes of want that are not 0.
	resize(ctx context.Context, id string, want sizes) error
}

// resizeSandbox is ResizeSandbox.
type resizeSandbox struct {
	CPU    *int `json:"cpu"`
	Memory *int `json:"memory"`
	Disk   *int `json:"disk"`
}

const stateResizing = "resizing"

func (s *Server) resizeSandbox(w http.ResponseWriter, r *http.Request) error {
	var req resizeSandbox
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	var want sizes
	for _, f := range []struct {
		name string
		v    *int
		dst  *float64
	}{{"cpu", req.CPU, &want.cpu}, {"memory", req.Memory, &want.memoryGiB}, {"disk", req.Disk, &want.diskGiB}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return errorf(http.StatusBadRequest, "%s must not be less than 1", f.name)
		}
		*f.dst = float64(*f.v)
	}
	if want == (sizes{}) {
		return errorf(http.StatusBadRequest, "give at least one of cpu, memory and disk")
	}
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var rz resizer
	var prev string
	if err == nil {
		prev = rec.state
		rz, err = s.beginResize(rec, want)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	err = rz.resize(r.Context(), rec.id, want)
	s.mu.Lock()
	rec.busy = false
	if err == nil {
		rec.sizes = want.or(rec.sizes)
	}
	s.set(rec, prev, "")
	dto, write := rec.dto(s.toolboxProxyURL(r)), rec.pending
	s.mu.Unlock()
	if err != nil {
		if errNotFound(err) {
			return errorf(http.StatusNotFound, "Sandbox with ID or name %s not found", r.PathValue("id"))
		}
		return engineError(fmt.Errorf("resizing the sandbox: %w", err))
	}
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording sandbox %s: %w", rec.id, err)
	}
	writeJSON(w, dto)
	return nil
}

// beginResize checks that rec's sandbox may get the sizes of want that
// are not 0, moves it to resizing and marks it busy, and returns the
// engine that resizes it.
func (s *Server) beginResize(rec *record, want sizes) (resizer, error) {
	if rec.errored() {
		return nil, errorf(http.StatusBadRequest, msgErrored)
	}
	if err := checkIdle(rec); err != nil {
		return nil, err
	}
	if s.closing {
		return nil, &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error(), Err: errClosed}
	}
	state, cur := rec.state, rec.sizes
	if state != stateStarted && state != stateStopped {
		return nil, errorf(http.StatusBadRequest, "Sandbox must be started or stopped to resize, not %s", state)
	}
	switch {
	case want.diskGiB != 0 && want.diskGiB < cur.diskGiB:
		return nil, errorf(http.StatusBadRequest, "Disk size cannot be decreased (the sandbox has %g GiB)", cur.diskGiB)
	case want.diskGiB != 0 && want.diskGiB != cur.diskGiB && state != stateStopped:
		return nil, errorf(http.StatusBadRequest, "Disk can only be resized while the sandbox is stopped")
	case state != stateStopped && (want.cpu != 0 && want.cpu < cur.cpu || want.memoryGiB != 0 && want.memoryGiB < cur.memoryGiB):
		return nil, errorf(http.StatusBadRequest, "CPU and memory can only be decreased while the sandbox is stopped")
	}
	rz, ok := s.baseEngine().(resizer)
	if !ok {
		return nil, errorf(http.StatusNotImplemented, "agentbox serve cannot resize sandboxes with this engine: create a new sandbox with the sizes you need")
	}
	if err := rz.checkResize(cur, want, state == stateStarted); err != nil {
		return nil, err
	}
	rec.busy = true
	s.set(rec, stateResizing, "")
	return rz, nil
}

func (e localEngine) checkResize(cur, want sizes, running bool) error {
	switch {
	case want.diskGiB != 0 && want.diskGiB != cur.diskGiB:
		return errorf(http.StatusNotImplemented, "agentbox serve cannot change the disk of a sandbox: the local engine fixes its size when it creates the sandbox; create a new sandbox with the disk you need")
	case running && (want.cpu != 0 && want.cpu != cur.cpu || want.memoryGiB != 0 && want.memoryGiB != cur.memoryGiB):
		return errorf(http.StatusNotImplemented, "agentbox serve changes the cpu and memory of stopped sandboxes only (the local engine applies them when a sandbox starts): stop the sandbox first")
	}
	return nil
}

func (e localEngine) resize(ctx context.Context, id string, want sizes) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.UpdateResources(ctx, sandbox.Resources{CPUCores: want.cpu, MemoryMiB: want.resources().MemoryMiB})
}
