package server

import (
	"context"
	"net/http"
)

// Resizing (POST /sandbox/{id}/resize {cpu?, memory?, disk?}), with
// Daytona's rules: only a started or stopped sandbox; cpu and memory go
// down only while it is stopped; disk only grows, and only while it is
// stopped. The sandbox is "resizing" meanwhile, then back in its state.
// An engine that cannot change a sandbox's sizes (a resizer) refuses
// with 501, saying so.

// A resizer is an engine that changes the sizes of a sandbox.
type resizer interface {
	// resize gives sandbox id the sizes of want whose fields are not 0,
	// and returns its sizes then.
	resize(ctx context.Context, id string, want sizes) (sizes, error)
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
	return s.lifecycleCall(func(rec *record) error { return s.beginResize(rec, want) })(w, r)
}

// beginResize gives rec's sandbox the sizes of want that are not 0.
func (s *Server) beginResize(rec *record, want sizes) error {
	if rec.errored() {
		return errorf(http.StatusBadRequest, msgErrored)
	}
	if err := checkIdle(rec); err != nil {
		return err
	}
	prev := rec.state
	if prev != stateStarted && prev != stateStopped {
		return errorf(http.StatusBadRequest, "Sandbox must be started or stopped to resize, not %s", prev)
	}
	cur := rec.sizes
	switch {
	case want.diskGiB != 0 && want.diskGiB < cur.diskGiB:
		return errorf(http.StatusBadRequest, "Disk size cannot be decreased (the sandbox has %g GiB)", cur.diskGiB)
	case want.diskGiB != 0 && want.diskGiB != cur.diskGiB && prev != stateStopped:
		return errorf(http.StatusBadRequest, "Disk can only be resized while the sandbox is stopped")
	case prev != stateStopped && (want.cpu != 0 && want.cpu < cur.cpu || want.memoryGiB != 0 && want.memoryGiB < cur.memoryGiB):
		return errorf(http.StatusBadRequest, "CPU and memory can only be decreased while the sandbox is stopped")
	}
	rz, ok := s.eng.(resizer)
	if !ok {
		return errorf(http.StatusNotImplemented, "agentbox serve cannot resize sandboxes yet: the local engine sets cpu, memory and disk when it creates a sandbox; create a new sandbox with the sizes you need")
	}
	id := rec.id
	var got sizes
	s.set(rec, stateResizing, "")
	return s.launch(rec, func(ctx context.Context) (err error) {
		got, err = rz.resize(ctx, id, want)
		return err
	}, func(err error) {
		if err != nil {
			s.logf("agentbox serve: resizing sandbox %s: %v", id, err)
		} else {
			rec.sizes = got.or(rec.sizes)
		}
		s.set(rec, prev, "")
	})
}
