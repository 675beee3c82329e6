package server

import (
	"context"
	"net/http"
	"slices"
)

// Recovery: no sandbox stays stuck in a state. A server killed in the
// middle of a change leaves the record in its transitional state, which
// the next server resumes (persist.go's resume); the engine's own
// changes resume or roll back on their own (package local's recovery).
// Two rules close the remaining gaps:
//
//   - write ahead: a create touches the engine only once its record is on
//     disk (awaitRecord), so that no sandbox exists that no record names;
//   - an error sandbox can always be started again (beginStart, or
//     POST /sandbox/{id}/recover): the engine's sandbox, if it has one, is
//     started with its files; if it has none (the create failed), it is
//     created again from the record. Delete works in every state.

// awaitRecord waits until the latest write of rec's record is on disk.
// It takes s.mu itself: launch's op calls it before it touches the engine.
func (s *Server) awaitRecord(rec *record) {
	s.mu.Lock()
	w := rec.pending
	if s.noWriteAhead {
		w = nil
	}
	s.mu.Unlock()
	if w != nil {
		_ = w.wait() // a failed write was logged, and the create answered with it
	}
}

// specOf returns the spec rec's sandbox is created with, from its record.
// Called with s.mu held.
func (s *Server) specOf(ctx context.Context, rec *record) (spec, error) {
	sp := spec{name: rec.name, user: rec.user, env: rec.env, network: rec.network,
		language: rec.labels["code-toolbox-language"],
		// Until created, the sizes are those asked for.
		resources: rec.sizes.resources()}
	if rec.snapshot != DefaultSnapshot {
		sp.image = s.storeNameOf(ctx, rec)
	}
	vols, err := s.resolveVolumes(rec.org, slices.Clone(rec.volumes))
	if err != nil {
		return spec{}, err
	}
	sp.volumes = vols
	if sp.secrets, err = s.secrets.resolve(rec.org, rec.secrets); err != nil {
		return spec{}, err
	}
	return sp, nil
}

// beginRecover brings rec's sandbox, in the error state, back: started,
// or stopped when !start. Called with s.mu held.
func (s *Server) beginRecover(rec *record, start bool) error {
	if rec.busy {
		return errorf(http.StatusConflict, msgStateChange)
	}
	sp, err := s.specOf(s.ctx, rec)
	if err != nil {
		return err
	}
	create, err := s.eng.create(rec.id, sp)
	if err != nil {
		return engineError(err)
	}
	if rec.forkedFrom != "" {
		// A fork the engine lost cannot be made again from its record:
		// a new sandbox would lack the source's files.
		create = func(context.Context) (sizes, error) { return sizes{}, errInterruptedFork }
	}
	id, env := rec.id, rec.env
	rec.errorReason = ""
	desired := stateStarted
	if !start {
		desired = stateStopped
	}
	// A sandbox that never started (its create failed) is created again:
	// a restart meanwhile then resumes a create (resume), not a start of
	// a sandbox the engine does not have.
	via := stateStarting
	if rec.startedAt.IsZero() {
		via = stateCreating
	}
	s.set(rec, via, desired)
	var sz sizes
	return s.launch(rec, func(ctx context.Context) (err error) {
		sz, err = s.revive(ctx, id, env, create)
		if err == nil && !start {
			err = s.eng.stop(ctx, id)
		}
		return err
	}, func(err error) {
		if err != nil {
			s.fail(rec, "recovering the sandbox", err)
			return
		}
		rec.sizes = rec.sizes.or(sz)
		if !start {
			s.stopped(rec)
			return
		}
		rec.startedAt = s.now()
		s.set(rec, stateStarted, "")
	})
}

// revive starts sandbox id with its files when the engine has it, else
// removes what is left of it and creates it again with create.
func (s *Server) revive(ctx context.Context, id string, env map[string]string, create func(context.Context) (sizes, error)) (sizes, error) {
	if _, err := s.eng.status(ctx, id); !errNotFound(err) {
		return sizes{}, s.eng.start(ctx, id, env)
	}
	if err := s.eng.remove(ctx, id); err != nil && !errNotFound(err) {
		return sizes{}, err
	}
	return create(ctx)
}

// recoverSandbox is POST /sandbox/{id}/recover: Daytona's recovery of a
// sandbox in the error state, started again unless skipStart.
func (s *Server) recoverSandbox(w http.ResponseWriter, r *http.Request) error {
	skip := false
	if v := r.URL.Query().Get("skipStart"); v != "" {
		var err error
		if skip, err = parseBool("skipStart", v); err != nil {
			return err
		}
	}
	return s.withSandbox(func(_ *http.Request, rec *record) (any, error) {
		if rec.state != stateError {
			return nil, errorf(http.StatusBadRequest, "Sandbox %s is not in the error state (it is %s): only a sandbox in the error state can be recovered", rec.id, rec.state)
		}
		if err := s.beginRecover(rec, !skip); err != nil {
			return nil, err
		}
		return rec.dto(s.toolboxProxyURL(r)), nil
	})(w, r)
}
