package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Snapshots of sandboxes (issue 27): POST /sandbox/{id}/snapshot makes a
// snapshot of the organization of a started or stopped sandbox's files,
// which the sandbox goes on from (state snapshotting meanwhile). The
// snapshot is recorded as a built one is, so that a create from it works.

// createSandboxSnapshot is CreateSandboxSnapshot, the body of POST
// /sandbox/{id}/snapshot.
type createSandboxSnapshot struct {
	Name          string `json:"name"`
	IncludeMemory *bool  `json:"includeMemory"`
}

// msgNoMemorySnapshot answers includeMemory: the local engine's snapshots
// are of files.
const msgNoMemorySnapshot = "cannot keep memory in a snapshot on this engine: create the snapshot without includeMemory (its files are kept; pause the sandbox to keep its memory)"

func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request) error {
	var req createSandboxSnapshot
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.IncludeMemory != nil && *req.IncludeMemory {
		return errorf(http.StatusBadRequest, msgNoMemorySnapshot)
	}
	ie, err := s.imageStore("snapshots of sandboxes")
	if err != nil {
		return err
	}
	org := orgOf(r)
	// The checks of a snapshot's name, as POST /snapshots makes them.
	snap, _, err := newSnapshotRecord(&createSnapshot{Name: req.Name, ImageName: "sandbox"}, s.now())
	if err != nil {
		return err
	}
	// A snapshot is an image of the organization's, as a build's: the
	// same quota of the store bounds it (403 past it).
	if err := s.checkImageQuota(r.Context(), ie, org, s.sandboxBuildRefs(org)); err != nil {
		return err
	}
	snap.org, snap.imageName, snap.log = org, "", nil
	views, err := s.snapshotViews(r.Context(), org)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(views, func(v snapshotView) bool { return v.name == req.Name && v.owner == org }) {
		return errorf(http.StatusConflict, "Snapshot with name %s already exists", req.Name)
	}
	if err := s.reserveSnapshot(snap); err != nil {
		return err
	}
	v, write, err := s.callLocked(r, func(_ *http.Request, rec *record) (any, error) {
		return nil, s.beginSnapshot(rec, snap)
	})
	if err != nil {
		s.dropSnapshot(snap)
		return err
	}
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording sandbox %s: %w", r.PathValue("id"), err)
	}
	writeJSON(w, v)
	return nil
}

// reserveSnapshot adds snap, pending, to the snapshots' records unless
// its name is taken (409). It is written once its sandbox's work begins.
func (s *Server) reserveSnapshot(snap *snapshotRecord) error {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	recs := s.snapshots.records()
	key := snapKey(snap.org, snap.name)
	if recs[key] != nil {
		return errorf(http.StatusConflict, "Snapshot with name %s already exists", snap.name)
	}
	recs[key] = snap
	return nil
}

// dropSnapshot takes snap, whose making never began, off the records.
func (s *Server) dropSnapshot(snap *snapshotRecord) {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	if recs := s.snapshots.records(); recs[snapKey(snap.org, snap.name)] == snap {
		delete(recs, snapKey(snap.org, snap.name))
	}
}

// beginSnapshot makes snap of rec's started or stopped sandbox, which is
// snapshotting meanwhile and then as it was (started again when the
// engine had to stop it). Called with s.mu held.
func (s *Server) beginSnapshot(rec *record, snap *snapshotRecord) error {
	if err := checkIdle(rec); err != nil {
		return err
	}
	was := rec.state
	if was != stateStarted && was != stateStopped {
		return &httpError{Status: http.StatusConflict, Message: fmt.Sprintf("Sandbox is %s: only a started or stopped sandbox can be snapshotted", was), Err: sandbox.ErrInvalidState}
	}
	run, err := s.eng.snapshot(rec.id, orgImageName(snap.org, snap.name))
	if err != nil {
		return lifecycleError("snapshot", err)
	}
	id, env := rec.id, rec.env
	s.set(rec, stateSnapshotting, was)
	err = s.launch(rec, func(ctx context.Context) error {
		s.recordSnapshot(snap, snapshotPending, nil)
		err := run(ctx)
		s.recordSnapshot(snap, snapshotActive, err)
		if was == stateStarted {
			if serr := s.startAgain(ctx, id, env); err == nil {
				err = serr
			}
		}
		return err
	}, func(err error) {
		switch {
		case errNotFound(err):
			s.forget(rec)
		case err != nil:
			s.logf("agentbox serve: snapshot %s of sandbox %s: %v", snap.name, id, err)
		}
		s.set(rec, was, was) // observe sees what the engine says
	})
	return err
}

// startAgain starts sandbox id when the engine stopped it to snapshot it.
func (s *Server) startAgain(ctx context.Context, id string, env map[string]string) error {
	st, err := s.eng.status(ctx, id)
	if err != nil || st.running {
		return err
	}
	return s.eng.start(ctx, id, env)
}

// recordSnapshot moves snap to state, or to the error state with err's
// reason, recorded and published.
func (s *Server) recordSnapshot(snap *snapshotRecord, state string, err error) {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	old := snap.state
	snap.state, snap.updatedAt = state, s.now()
	if err != nil {
		snap.state, snap.errorReason = snapshotError, err.Error()
	}
	s.saveSnapshot(snap)
	if old == snapshotPending && state == snapshotPending {
		s.events.publish(&event{org: snap.org, name: eventSnapshotCreated, data: snap.view().dto(snap.org)})
		return
	}
	s.publishSnapshotState(snap, old)
}
