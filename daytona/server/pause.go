package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Pause and resume (issue 27): a paused sandbox's processes are frozen
// with their memory kept; start resumes it, and so does any request of
// the toolbox proxy. Auto-pause pauses a started sandbox idle for its
// interval; a paused one idle past its auto-stop interval is stopped,
// and one past its TTL (ttlMinutes after its creation) is deleted,
// whatever its state.

// States of pause and resume, and of a sandbox being snapshotted, as
// api.json's SandboxState spells them.
const (
	statePausing      = "pausing"
	statePaused       = "paused"
	stateResuming     = "resuming"
	stateSnapshotting = "snapshotting"
)

// msgNotPausable answers a pause of a sandbox that is not started.
const msgNotPausable = "Sandbox is not started: only a started sandbox can be paused"

// beginPause pauses rec's started sandbox; notify, when not nil, runs
// (with s.mu held) with the pause's outcome. A pause the engine refuses
// leaves the sandbox started.
func (s *Server) beginPause(rec *record, notify func(error)) error {
	if err := checkIdle(rec); err != nil {
		return err
	}
	switch rec.state {
	case statePaused:
		if notify != nil {
			notify(nil)
		}
		return nil
	case stateStarted:
	default:
		return &httpError{Status: http.StatusConflict, Message: msgNotPausable, Err: sandbox.ErrInvalidState}
	}
	id := rec.id
	s.set(rec, statePausing, statePaused)
	return s.launch(rec, func(ctx context.Context) error {
		return s.eng.pause(ctx, id)
	}, func(err error) {
		switch {
		case errNotFound(err):
			s.forget(rec)
		case err != nil:
			// Frozen or not, the engine says which: observe sees it.
			s.set(rec, stateStarted, stateStarted)
			s.logf("agentbox serve: pausing sandbox %s: %v", id, err)
		default:
			s.set(rec, statePaused, "")
		}
		if notify != nil {
			notify(err)
		}
	})
}

// beginAutoPause is beginPause without a caller to tell.
func (s *Server) beginAutoPause(rec *record) error { return s.beginPause(rec, nil) }

// beginResume resumes rec's paused sandbox.
func (s *Server) beginResume(rec *record) error {
	id := rec.id
	s.set(rec, stateResuming, stateStarted)
	return s.launch(rec, func(ctx context.Context) error {
		return s.eng.resume(ctx, id)
	}, func(err error) {
		switch {
		case errNotFound(err):
			s.forget(rec)
		case err != nil:
			s.fail(rec, "resuming the sandbox", err)
		default:
			s.set(rec, stateStarted, "")
		}
	})
}

// pauseSandbox answers POST /sandbox/{id}/pause once the sandbox is
// paused, or with why it could not be.
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) error {
	done := make(chan error, 1)
	_, _, err := s.callLocked(r, func(_ *http.Request, rec *record) (any, error) {
		return nil, s.beginPause(rec, func(err error) { done <- err })
	})
	if err != nil {
		return err
	}
	select {
	case err = <-done:
	case <-s.ctx.Done():
		err = &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error(), Err: errClosed}
	}
	if err != nil {
		return lifecycleError("pause", err)
	}
	return s.withSandbox(func(*http.Request, *record) (any, error) { return nil, nil })(w, r)
}

// lifecycleError maps an engine's error of operation what to the
// client's: 400 for what the engine cannot do, 409 for a sandbox not in
// a state that allows it.
func lifecycleError(what string, err error) error {
	switch {
	case errUnsupported(err):
		return &httpError{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s: %v", what, err), Err: err}
	case errNotFound(err):
		return &httpError{Status: http.StatusNotFound, Message: fmt.Sprintf("%s: the sandbox is gone", what), Err: err}
	case errors.Is(err, sandbox.ErrInvalidState):
		return &httpError{Status: http.StatusConflict, Message: fmt.Sprintf("%s: %v", what, err), Err: err}
	}
	return engineError(fmt.Errorf("%s: %w", what, err))
}

// resumeForToolbox resumes rec's paused sandbox for a request of the
// toolbox proxy and waits until it is no longer paused or resuming; it
// returns the state then. It takes s.mu itself.
func (s *Server) resumeForToolbox(ctx context.Context, rec *record) (string, error) {
	s.mu.Lock()
	if rec.state == statePaused && !rec.busy {
		if err := s.beginResume(rec); err != nil {
			s.mu.Unlock()
			return "", err
		}
	}
	s.mu.Unlock()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		state := rec.state
		s.mu.Unlock()
		if state != statePaused && state != stateResuming {
			return state, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// observeMore applies to rec what observe leaves to pause.go: the TTL,
// the paused state and auto-pause. It reports whether it dealt with rec.
// Called with s.mu held, rec not busy, st the engine's status.
func (s *Server) observeMore(rec *record, st engineStatus, now time.Time) bool {
	logged := func(what string, err error) {
		if err != nil {
			s.logf("agentbox serve: %s sandbox %s: %v", what, rec.id, err)
		}
	}
	switch {
	case rec.ttl > 0 && !now.Before(rec.createdAt.Add(minutes(rec.ttl))):
		logged("deleting (its TTL passed)", s.beginDestroy(rec))
	case rec.state == statePaused && st.paused:
		if rec.autoStop > 0 && now.Sub(idleSince(rec)) >= minutes(rec.autoStop) {
			logged("auto-stopping paused", s.beginStop(rec))
		}
	case rec.state == statePaused && st.running: // resumed behind the server's back
		s.set(rec, stateStarted, stateStarted)
	case rec.state == statePaused:
		s.stopped(rec)
	case rec.state == stateStarted && st.paused: // paused behind its back
		s.set(rec, statePaused, statePaused)
	case rec.state == stateStarted && st.running && rec.autoPause > 0 && now.Sub(idleSince(rec)) >= minutes(rec.autoPause):
		logged("auto-pausing", s.beginAutoPause(rec))
	default:
		return false
	}
	return true
}

// idleSince is when rec's sandbox was last used: started or active.
func idleSince(rec *record) time.Time {
	if rec.lastActivity.After(rec.startedAt) {
		return rec.lastActivity
	}
	return rec.startedAt
}

// setPauseAndTTL sets rec's auto-pause interval and TTL from a create
// request, checked as api.json says: autoPauseInterval is not for
// ephemeral sandboxes, and it and autoStopInterval are not both
// non-zero (auto-pause alone disables the default auto-stop).
func setPauseAndTTL(rec *record, req *createSandbox) error {
	if v := req.TTLMinutes; v != nil {
		if *v < 0 {
			return errorf(http.StatusBadRequest, "ttlMinutes must not be less than 0")
		}
		rec.ttl = *v
	}
	v := req.AutoPauseInterval
	if v == nil || *v == 0 {
		return nil
	}
	switch {
	case *v < 0:
		return errorf(http.StatusBadRequest, "autoPauseInterval must not be less than 0")
	case rec.autoDelete == 0:
		return errorf(http.StatusBadRequest, "autoPauseInterval is not allowed for ephemeral sandboxes (autoDeleteInterval 0)")
	case req.AutoStopInterval != nil && *req.AutoStopInterval != 0:
		return errorf(http.StatusBadRequest, "at most one of autoStopInterval and autoPauseInterval may be non-zero")
	}
	rec.autoPause, rec.autoStop = *v, 0
	return nil
}

// autoDestroyAt is when rec's TTL deletes it, as api.json's
// autoDestroyAt; "" without a TTL.
func (rec *record) autoDestroyAt() string {
	if rec.ttl <= 0 {
		return ""
	}
	return rec.createdAt.Add(minutes(rec.ttl)).UTC().Format(timeLayout)
}
