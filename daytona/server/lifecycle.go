package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The lifecycle: each call checks the sandbox's state, moves it to a
// transitional state and runs the engine's work in the background
// (launch); the work's end moves it on. Every function here that takes a
// *record is called with s.mu held.

// lookup returns the record of the sandbox with id or name idOrName
// of organization org: another organization's sandbox is not found.
func (s *Server) lookup(org, idOrName string) (*record, error) {
	if rec := s.byID[idOrName]; rec != nil && rec.org == org {
		return rec, nil
	}
	if rec := s.byName[nameKey(org, idOrName)]; rec != nil {
		return rec, nil
	}
	return nil, errorf(http.StatusNotFound, "Sandbox with ID or name %s not found", idOrName)
}

// nameKey is the key of byName and volumesByName: names are unique within
// an organization.
func nameKey(org, name string) string { return org + "\x00" + name }

// launch runs op in the background for rec, which the caller has just
// moved to a transitional state, and marks rec busy until op returns;
// done then runs, with s.mu held, with op's error — unless Close
// cancelled op.
func (s *Server) launch(rec *record, op func(ctx context.Context) error, done func(err error)) error {
	if s.closing {
		return &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error(), Err: errClosed}
	}
	rec.busy = true
	rec.touch(s.now())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := op(s.ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		rec.busy = false
		if err != nil && s.ctx.Err() != nil {
			// Close cancelled op: the record keeps its transitional
			// state, and the next server resumes the change.
			return
		}
		rec.touch(s.now())
		done(err)
		s.persist(rec)
	}()
	return nil
}

// fail puts rec in the error state because of err.
func (s *Server) fail(rec *record, what string, err error) {
	rec.errorReason = fmt.Sprintf("%s: %v", what, err)
	s.set(rec, failedState(err), "")
	s.logf("agentbox serve: sandbox %s: %s", rec.id, rec.errorReason)
}

// forget removes rec from the server: the sandbox is gone.
func (s *Server) forget(rec *record) {
	s.set(rec, stateDestroyed, stateDestroyed)
	if s.byID[rec.id] == rec {
		delete(s.byID, rec.id)
	}
	if k := nameKey(rec.org, rec.name); s.byName[k] == rec {
		delete(s.byName, k)
	}
	s.unrecord(rec)
	s.previews.closeAll(rec.id)
	for token, sp := range s.signed {
		if sp.id == rec.id {
			delete(s.signed, token)
		}
	}
}

// checkIdle refuses a lifecycle call on rec while another is in flight.
func checkIdle(rec *record) error {
	if rec.busy || rec.state != rec.desired {
		return errorf(http.StatusConflict, msgStateChange)
	}
	return nil
}

// beginCreate creates and starts rec's sandbox with start.
func (s *Server) beginCreate(rec *record, start func(context.Context) (sizes, error)) error {
	first := stateCreating
	if rec.build != nil {
		first = statePendingBuild
	}
	s.set(rec, first, stateStarted)
	var sz sizes
	return s.launch(rec, func(ctx context.Context) (err error) {
		s.awaitRecord(rec) // write ahead: recover.go
		sz, err = start(ctx)
		return err
	}, func(err error) {
		if err != nil {
			s.fail(rec, "creating the sandbox", err)
			return
		}
		rec.sizes = rec.sizes.or(sz)
		rec.startedAt = s.now()
		s.set(rec, stateStarted, "")
	})
}

// or returns sz with its zero fields taken from def.
func (sz sizes) or(def sizes) sizes {
	if sz.cpu == 0 {
		sz.cpu = def.cpu
	}
	if sz.memoryGiB == 0 {
		sz.memoryGiB = def.memoryGiB
	}
	if sz.diskGiB == 0 {
		sz.diskGiB = def.diskGiB
	}
	return sz
}

// beginStart starts rec's stopped sandbox, or recovers it from the error
// state.
func (s *Server) beginStart(rec *record) error {
	if rec.state == stateError {
		return s.beginRecover(rec, true) // recover.go
	}
	if rec.errored() {
		return errorf(http.StatusBadRequest, msgErrored)
	}
	if rec.state == stateResuming {
		return nil // the resume in flight (pause.go) starts it
	}
	if err := checkIdle(rec); err != nil {
		return err
	}
	via := stateStarting
	switch rec.state {
	case stateStarted:
		return nil // as Daytona: nothing to do
	case stateArchived:
		via = stateRestoring
	case statePaused:
		return s.beginResume(rec)
	case stateStopped:
	default:
		return errorf(http.StatusBadRequest, "Sandbox is not in valid state")
	}
	id, env := rec.id, rec.env
	s.set(rec, via, stateStarted)
	return s.launch(rec, func(ctx context.Context) error {
		return s.eng.start(ctx, id, env)
	}, func(err error) {
		if err != nil {
			s.fail(rec, "starting the sandbox", err)
			return
		}
		rec.startedAt = s.now()
		s.set(rec, stateStarted, "")
	})
}

// beginStop stops rec's started sandbox, and deletes it then when its
// auto-delete interval is 0.
func (s *Server) beginStop(rec *record) error {
	if rec.errored() {
		return errorf(http.StatusBadRequest, msgErrored)
	}
	if err := checkIdle(rec); err != nil {
		return err
	}
	if rec.state != stateStarted && rec.state != statePaused {
		return errorf(http.StatusBadRequest, "Sandbox is not in a stoppable state")
	}
	id := rec.id
	s.set(rec, stateStopping, stateStopped)
	return s.launch(rec, func(ctx context.Context) error {
		return s.eng.stop(ctx, id)
	}, func(err error) {
		switch {
		case errNotFound(err):
			s.forget(rec)
		case err != nil:
			s.fail(rec, "stopping the sandbox", err)
		default:
			s.stopped(rec)
		}
	})
}

// stopped records that rec's sandbox stopped, and deletes it when its
// auto-delete interval is 0 (ephemeral).
func (s *Server) stopped(rec *record) {
	rec.stoppedAt = s.now()
	s.set(rec, stateStopped, stateStopped)
	rec.touch(rec.stoppedAt)
	s.previews.closeAll(rec.id)
	if rec.autoDelete == 0 {
		if err := s.beginDestroy(rec); err != nil {
			s.logf("agentbox serve: deleting ephemeral sandbox %s: %v", rec.id, err)
		}
	}
}

// beginArchive archives rec's stopped sandbox. Its files stay where they
// are, on this machine's disk: the archived state only says that start
// goes through restoring, as Daytona's does.
func (s *Server) beginArchive(rec *record) error {
	if rec.errored() {
		return errorf(http.StatusBadRequest, msgErrored)
	}
	if err := checkIdle(rec); err != nil {
		return err
	}
	switch {
	case rec.state == stateArchived:
		return nil
	case rec.state != stateStopped:
		return errorf(http.StatusBadRequest, "Sandbox is not stopped")
	case rec.autoDelete == 0:
		return errorf(http.StatusBadRequest, "Ephemeral sandboxes cannot be archived")
	}
	s.set(rec, stateArchiving, stateArchived)
	return s.launch(rec, func(context.Context) error { return nil }, func(error) {
		s.set(rec, stateArchived, "")
	})
}

// beginDestroy deletes rec's sandbox, whatever its state, unless another
// operation is in flight.
func (s *Server) beginDestroy(rec *record) error {
	if rec.busy {
		return errorf(http.StatusConflict, msgStateChange)
	}
	id := rec.id
	s.set(rec, stateDestroying, stateDestroyed)
	return s.launch(rec, func(ctx context.Context) error {
		return s.eng.remove(ctx, id)
	}, func(err error) {
		if err != nil && !errNotFound(err) {
			s.fail(rec, "deleting the sandbox", err)
			return
		}
		s.forget(rec)
	})
}

// reconcileLoop looks at every sandbox each tick, until Close.
func (s *Server) reconcileLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-s.timers.Done():
			return
		case <-t.C:
			s.sweepSigned()
			s.mu.Lock()
			recs := make([]*record, 0, len(s.byID))
			for _, rec := range s.byID {
				recs = append(recs, rec)
			}
			s.mu.Unlock()
			for _, rec := range recs {
				s.observe(s.timers, rec)
			}
		}
	}
}

// observe brings rec up to date with its sandbox (stopped, started or
// removed behind the server's back; its last activity) and applies its
// auto-stop and auto-delete intervals. It takes s.mu itself.
func (s *Server) observe(ctx context.Context, rec *record) {
	s.mu.Lock()
	id, state, busy := rec.id, rec.state, rec.busy
	s.mu.Unlock()
	if busy || (state != stateStarted && state != stateStopped && state != stateArchived && state != statePaused) {
		return
	}
	st, err := s.eng.status(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.busy || rec.state != state || s.byID[id] != rec {
		return // changed meanwhile: the next look sees it
	}
	// The last activity alone is not written to the records at once:
	// the engine keeps it too, and the next server reads it back.
	now := s.now()
	switch {
	case errNotFound(err):
		s.forget(rec)
		return
	case err != nil:
		if ctx.Err() == nil {
			s.logf("agentbox serve: looking at sandbox %s: %v", id, err)
		}
		return
	case st.lastUsed.After(rec.lastActivity):
		rec.lastActivity = st.lastUsed
	}
	if s.observeMore(rec, st, now) {
		return // pause.go: paused, TTL and auto-pause
	}
	switch {
	case state == stateStarted && !st.running:
		s.stopped(rec)
	case state != stateStarted && st.running:
		rec.startedAt = now
		s.set(rec, stateStarted, stateStarted)
		rec.touch(now)
	case state == stateStarted && rec.autoStop > 0:
		idle := rec.startedAt
		if rec.lastActivity.After(idle) {
			idle = rec.lastActivity
		}
		if now.Sub(idle) >= minutes(rec.autoStop) {
			if err := s.beginStop(rec); err != nil {
				s.logf("agentbox serve: auto-stopping sandbox %s: %v", id, err)
			}
		}
	case state != stateStarted && rec.autoDelete >= 0 && now.Sub(rec.stoppedAt) >= minutes(rec.autoDelete):
		if err := s.beginDestroy(rec); err != nil {
			s.logf("agentbox serve: auto-deleting sandbox %s: %v", id, err)
		}
	case state == stateStopped && now.Sub(rec.stoppedAt) >= archiveAfter(rec.autoArchive):
		if err := s.beginArchive(rec); err != nil {
			s.logf("agentbox serve: auto-archiving sandbox %s: %v", id, err)
		}
	}
}

// archiveAfter is how long a sandbox stays stopped before it is archived:
// n minutes, the longest interval when n is 0.
func archiveAfter(n int) time.Duration {
	if n == 0 {
		n = maxAutoArchiveInterval
	}
	return minutes(n)
}

// minutes returns n minutes.
func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// newID returns a new sandbox id: a random UUID (version 4), as Daytona's.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// engineError maps an error of the engine refusing a request to the
// client's 400, other errors to 500.
func engineError(err error) error {
	if errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrIsolationUnavailable) {
		return &httpError{Status: http.StatusBadRequest, Message: err.Error(), Err: err}
	}
	return err
}

// parseBool parses a boolean path or query value as NestJS does.
func parseBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		return false, errorf(http.StatusBadRequest, "%s must be a boolean value", name)
	}
	return b, nil
}
