package server

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Listing, getting and deleting snapshots.

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	page, err := positiveQuery(q.Get("page"), "page", 1, maxInt32)
	if err != nil {
		return err
	}
	limit, err := positiveQuery(q.Get("limit"), "limit", 100, 200)
	if err != nil {
		return err
	}
	sortBy, order := cmp.Or(q.Get("sort"), "lastUsedAt"), cmp.Or(q.Get("order"), "desc")
	if !slices.Contains([]string{"name", "state", "lastUsedAt", "createdAt"}, sortBy) {
		return errorf(http.StatusBadRequest, "sort must be one of the following values: name, state, lastUsedAt, createdAt")
	}
	if order != "asc" && order != "desc" {
		return errorf(http.StatusBadRequest, "order must be one of the following values: asc, desc")
	}
	views, err := s.snapshotViews(r.Context(), orgOf(r))
	if err != nil {
		return err
	}
	var items []snapshotDTO
	s.snapshots.mu.Lock()
	for _, v := range views {
		if strings.Contains(strings.ToLower(v.name), strings.ToLower(q.Get("name"))) {
			items = append(items, v.dto(orgOf(r)))
		}
	}
	s.snapshots.mu.Unlock()
	key := func(d snapshotDTO) string {
		switch sortBy {
		case "name":
			return d.Name
		case "state":
			return d.State
		case "lastUsedAt":
			if d.LastUsedAt != nil {
				return *d.LastUsedAt
			}
		}
		return d.CreatedAt
	}
	slices.SortStableFunc(items, func(a, b snapshotDTO) int {
		if order == "desc" {
			return strings.Compare(key(b), key(a))
		}
		return strings.Compare(key(a), key(b))
	})
	out := paginatedSnapshots{Items: []snapshotDTO{}, Total: len(items), Page: page, TotalPages: (len(items) + limit - 1) / limit}
	if lo := (page - 1) * limit; lo < len(items) {
		out.Items = items[lo:min(lo+limit, len(items))]
	}
	writeJSON(w, out)
	return nil
}

// maxInt32 bounds numbers of the query.
const maxInt32 = 1<<31 - 1

// positiveQuery parses the query value v of name: def when empty, else a
// whole number from 1 to most.
func positiveQuery(v, name string, def, most int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, errorf(http.StatusBadRequest, "%s must be a whole number from 1 to %d", name, most)
	}
	return n, nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	writeJSON(w, v.dto(orgOf(r)))
	return nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	if v.name == DefaultSnapshot {
		return errorf(http.StatusBadRequest, "Snapshot %s is the default snapshot (the host's system folders) and cannot be deleted", v.name)
	}
	if v.owner == "" {
		return errorf(http.StatusForbidden, "Snapshot %s is an image the operator of agentbox serve published: only the operator can remove it", v.name)
	}
	s.snapshots.mu.Lock()
	if r := v.rec; r != nil && (r.state == snapshotPending || r.state == snapshotBuilding || r.state == snapshotPulling) {
		s.snapshots.mu.Unlock()
		return errorf(http.StatusConflict, "Snapshot %s is %s: delete it once its build has ended", v.name, r.state)
	}
	s.snapshots.mu.Unlock()
	if v.img != nil {
		ie, err := s.imageStore("snapshots")
		if err != nil {
			return err
		}
		if err := ie.untag(r.Context(), v.storeName); err != nil && !errNotFound(err) {
			return err
		}
	}
	s.snapshots.mu.Lock()
	var write *storeWrite
	if key := snapKey(v.owner, v.name); s.snapshots.records()[key] == v.rec {
		delete(s.snapshots.records(), key)
		write = s.unrecordSnapshot(v.owner, v.name)
	}
	s.snapshots.mu.Unlock()
	if err := write.wait(); err != nil {
		return err
	}
	s.events.publish(&event{org: v.owner, name: eventSnapshotRemoved, data: v.id()})
	return nil
}
