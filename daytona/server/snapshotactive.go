package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Activating and deactivating snapshots, and checking that one is active
// before a sandbox is made of it.

// setSnapshotActive returns the handler of activate (active true) and
// deactivate.
func (s *Server) setSnapshotActive(active bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
		if err != nil {
			return err
		}
		if v.name == DefaultSnapshot {
			return errorf(http.StatusBadRequest, "Snapshot %s is the default snapshot and is always active", v.name)
		}
		if v.owner == "" {
			return errorf(http.StatusForbidden, "Snapshot %s is an image the operator of agentbox serve published: only the operator can change it", v.name)
		}
		s.snapshots.mu.Lock()
		rec := v.rec
		if rec == nil {
			now := s.now()
			rec = &snapshotRecord{org: v.owner, name: v.name, state: snapshotActive, createdAt: v.img.created, updatedAt: now}
			s.snapshots.records()[snapKey(v.owner, v.name)] = rec
			v.rec = rec
		}
		switch {
		case active && rec.state == snapshotActive:
			s.snapshots.mu.Unlock()
			return errorf(http.StatusBadRequest, "Snapshot %s is already active", v.name)
		case active && rec.state != snapshotInactive, !active && rec.state != snapshotActive && rec.state != snapshotInactive:
			s.snapshots.mu.Unlock()
			return errorf(http.StatusBadRequest, "Snapshot %s is %s, not inactive", v.name, rec.state)
		case active:
			rec.state = snapshotActive
		default:
			rec.state = snapshotInactive
		}
		rec.updatedAt = s.now()
		s.publishSnapshotState(rec, map[bool]string{true: snapshotInactive, false: snapshotActive}[active])
		write, dto := s.saveSnapshot(rec), v.dto(orgOf(r))
		s.snapshots.mu.Unlock()
		if err := write.wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording snapshot %s: %w", v.name, err)
		}
		if !active {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		writeJSON(w, dto)
		return nil
	}
}

// usableSnapshot checks that the snapshot ref (a name or id) organization
// org sees may make a new sandbox, records its use, and returns it and
// the sizes it was created with (0 for the engine's default). Anything
// else (an image of the store by another name, an id or a prefix of one,
// a path) is refused with 400.
func (s *Server) usableSnapshot(ctx context.Context, org, ref string) (snapshotView, snapshotRecord, error) {
	v, err := s.findSnapshot(ctx, org, ref)
	if errors.As(err, new(*httpError)) {
		return snapshotView{}, snapshotRecord{}, errorf(http.StatusBadRequest, "Snapshot %s not found: create it first (POST /api/snapshots)", ref)
	}
	if err != nil {
		return snapshotView{}, snapshotRecord{}, err
	}
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	if v.rec == nil {
		return v, snapshotRecord{}, nil
	}
	if v.rec.state != snapshotActive {
		return snapshotView{}, snapshotRecord{}, errorf(http.StatusBadRequest, "Snapshot %s is %s", v.name, v.rec.state)
	}
	v.rec.lastUsedAt = s.now()
	s.saveSnapshot(v.rec)
	return v, snapshotRecord{cpu: v.rec.cpu, mem: v.rec.mem, disk: v.rec.disk}, nil
}
