package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Forks (issue 27): POST /sandbox/{id}/fork makes a new sandbox of the
// caller's organization with a copy of the source's files and its
// configuration (resources, network policy, volumes, intervals), started
// or stopped as the source is; the source is left as it is. GET
// /sandbox/{id}/forks lists the forks of a sandbox.

// forkSandbox is ForkSandbox, the body of POST /sandbox/{id}/fork.
type forkSandbox struct {
	Name string `json:"name"`
}

// lifecycleRoutes adds the routes of fork, pause, activity and
// sandbox snapshots with api, which checks the key and the organization.
func (s *Server) lifecycleRoutes(api func(pattern string, h handlerFunc)) {
	api("POST /api/sandbox/{id}/fork", s.forkSandbox)
	api("GET /api/sandbox/{id}/forks", s.listForks)
	api("POST /api/sandbox/{id}/pause", s.pauseSandbox)
	api("POST /api/sandbox/{id}/autopause/{interval}", s.setInterval(func(rec *record, v int) {
		rec.autoPause = v
		if v > 0 {
			rec.autoStop = 0 // at most one of them is non-zero
		}
	}, 0))
	api("POST /api/sandbox/{id}/last-activity", s.updateLastActivity)
	api("POST /api/sandbox/{id}/snapshot", s.snapshotSandbox)
	api("GET /api/sandbox/{id}/activity", s.getActivity) // activitytrail.go
}

func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	var req forkSandbox
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name != "" {
		if err := checkName(req.Name); err != nil {
			return err
		}
	}
	s.mu.Lock()
	rec, write, err := s.addFork(orgOf(r), r.PathValue("id"), req.Name)
	var dto sandboxDTO
	if err == nil {
		dto = rec.dto(s.toolboxProxyURL(r))
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording sandbox %s: %w", rec.id, err)
	}
	writeJSON(w, dto)
	return nil
}

// addFork adds the record of a fork named name (its id when "") of
// organization org's sandbox srcRef and starts the fork. It returns the
// record and its write. Called with s.mu held.
func (s *Server) addFork(org, srcRef, name string) (*record, *storeWrite, error) {
	src, err := s.lookup(org, srcRef)
	if err != nil {
		return nil, nil, err
	}
	if err := checkForkable(src); err != nil {
		return nil, nil, err
	}
	rec := src.forkRecord(s.now())
	if name != "" {
		rec.name = name
	}
	if s.byName[nameKey(org, rec.name)] != nil || s.byID[rec.name] != nil {
		return nil, nil, errorf(http.StatusConflict, "Sandbox with name %s already exists", rec.name)
	}
	if err := s.checkSandboxQuota(org); err != nil {
		return nil, nil, err
	}
	run, err := s.eng.fork(src.id, rec.id, rec.name, rec.env)
	if err != nil {
		return nil, nil, lifecycleError("fork", err)
	}
	desired := src.state
	s.set(rec, stateCreating, desired)
	src.busy = true // no stop, delete or second fork of it meanwhile
	err = s.launch(rec, func(ctx context.Context) error {
		s.awaitRecord(rec) // write ahead, as a create: recover.go
		return run(ctx)
	}, func(err error) {
		src.busy = false
		if err != nil {
			s.fail(rec, "forking the sandbox", err)
			return
		}
		if desired == stateStarted {
			rec.startedAt = s.now()
		} else {
			rec.stoppedAt = s.now()
		}
		s.set(rec, desired, "")
	})
	if err != nil {
		src.busy = false
		return nil, nil, err
	}
	s.byID[rec.id], s.byName[nameKey(org, rec.name)] = rec, rec
	write, err := s.save(rec)
	if err != nil {
		return nil, nil, err
	}
	s.events.publish(&event{org: org, name: eventCreated, dto: rec.dto("")})
	return rec, write, nil
}

// checkForkable refuses a fork of src unless it is started or stopped
// with no change in flight: 409 when it is being destroyed or changing.
func checkForkable(src *record) error {
	switch {
	case src.state == stateDestroying || src.desired == stateDestroyed:
		return &httpError{Status: http.StatusConflict, Message: "Sandbox is being destroyed: it cannot be forked", Err: sandbox.ErrInvalidState}
	case src.busy || src.state != src.desired:
		return errorf(http.StatusConflict, msgStateChange)
	case src.state != stateStarted && src.state != stateStopped:
		return &httpError{Status: http.StatusConflict, Message: fmt.Sprintf("Sandbox is %s: only a started or stopped sandbox can be forked", src.state), Err: sandbox.ErrInvalidState}
	}
	return nil
}

// forkRecord returns the record of a new fork of src, created at now.
func (src *record) forkRecord(now time.Time) *record {
	rec := &record{
		id: newID(), org: src.org, user: src.user, snapshot: src.snapshot, target: src.target,
		env: maps.Clone(src.env), labels: maps.Clone(src.labels), public: src.public,
		previewToken: newToken(), network: src.network, volumes: slices.Clone(src.volumes), sizes: src.sizes,
		autoStop: src.autoStop, autoArchive: src.autoArchive, autoDelete: src.autoDelete, autoPause: src.autoPause,
		forkedFrom: src.id, createdAt: now, updatedAt: now,
		secrets: slices.Clone(src.secrets), hadSecrets: len(src.secrets) > 0,
	}
	rec.name = rec.id
	return rec
}

// listForks answers GET /sandbox/{id}/forks: the sandboxes of the
// caller's organization forked from it, oldest first. Forks that were
// deleted are not kept, so includeDestroyed adds none.
func (s *Server) listForks(w http.ResponseWriter, r *http.Request) error {
	if v := r.URL.Query().Get("includeDestroyed"); v != "" {
		if _, err := parseBool("includeDestroyed", v); err != nil {
			return err
		}
	}
	s.mu.Lock()
	src, err := s.lookup(orgOf(r), r.PathValue("id"))
	var forks []*record
	if err == nil {
		for _, rec := range s.byID {
			if rec.forkedFrom == src.id && rec.org == src.org {
				forks = append(forks, rec)
			}
		}
	}
	slices.SortFunc(forks, func(a, b *record) int { return a.createdAt.Compare(b.createdAt) })
	out := make([]sandboxDTO, len(forks))
	for i, rec := range forks {
		out[i] = rec.dto(s.toolboxProxyURL(r))
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	writeJSON(w, out)
	return nil
}
