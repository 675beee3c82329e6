package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Warm pools (Daytona's /warm-pools): an organization asks the server to
// keep a number of spare sandboxes of one snapshot started ahead of time,
// and a create of that snapshot whose other settings a spare can take
// (warmpoolspare.go) takes one: the create answers with the sandbox
// started, having waited for none of its creation. The pool then starts a
// replacement in the background.
//
// A spare is an ordinary sandbox of the engine, created and started as a
// create would, under a sandbox id of the server's making; until taken
// it has no record among the sandboxes: list and get do not show it, and
// it does not count against the organization's sandbox quota. Taken, it
// becomes the new sandbox under its id, with the create's name, labels,
// network policy and timers. Pools are kept in the server's records
// (warmpoolstore.go) with the ids of their spares, so that a restarted
// server takes the spares that still run back into their pools, removes
// the others and refills to the recorded size. Close leaves the ready
// spares running, for the next server; a spare being created when the
// server ends is removed by the next.
//
// Bounds: a pool keeps 1 to maxWarmPoolSize spares (an update may set 0,
// which drains it), and the spares of all of an organization's pools
// count against its sandbox quota (Options.MaxSandboxesPerOrg), as Daytona
// caps pools by the organization's quota: a pool whose size would take
// the organization's spares past it is refused with 403. An organization
// has at most one pool per snapshot and target (409 for a second).

// maxWarmPoolSize bounds a pool's size: every spare is a running sandbox
// (an init, a uid range, a network link, its root's mount).
const maxWarmPoolSize = 10

// warmPool is one pool. Its fields are guarded by warmPools.mu.
type warmPool struct {
	id, org string
	// snapshot is the snapshot's name as the organization sees it;
	// storeName its image's in the engine's store ("" for the default).
	snapshot, storeName string
	// snapshotID is the snapshot's id, which a create may name it by.
	snapshotID string
	target     string
	size       int
	// sizes are the resources of the spares, in Daytona's units: the
	// snapshot's, or the engine's defaults once a spare has been made.
	sizes sizes
	// spares are the ids of the spares ready, oldest first; starting
	// those being created.
	spares   []string
	starting []string
	// spareSizes are the sizes each ready spare was created with.
	spareSizes map[string]sizes
	// errorReason is why the last spare's creation failed ("" once one
	// succeeds); retryAt when the pool tries again.
	errorReason string
	retryAt     time.Time

	createdAt, updatedAt time.Time
}

// warmPools are the server's pools.
type warmPools struct {
	mu   sync.Mutex
	byID map[string]*warmPool
	// wake, when signalled, makes the filler look at the pools again.
	wake chan struct{}
}

// poke wakes the filler without waiting.
func (wp *warmPools) poke() {
	select {
	case wp.wake <- struct{}{}:
	default:
	}
}

// warmPoolDTO is api.json's WarmPool.
type warmPoolDTO struct {
	ID          string            `json:"id"`
	Org         string            `json:"organizationId"`
	Snapshot    string            `json:"snapshot"`
	Target      string            `json:"target"`
	Pool        int               `json:"pool"`
	CurrentSize int               `json:"currentSize"`
	CPU         float64           `json:"cpu"`
	Mem         float64           `json:"mem"`
	Disk        float64           `json:"disk"`
	OSUser      string            `json:"osUser"`
	Env         map[string]string `json:"env"`
	ErrorReason *string           `json:"errorReason"`
	CreatedAt   string            `json:"createdAt"`
	UpdatedAt   string            `json:"updatedAt"`
}

// dto returns p as the API answers it. Called with warmPools.mu held.
func (p *warmPool) dto() warmPoolDTO {
	d := warmPoolDTO{ID: p.id, Org: p.org, Snapshot: p.snapshot, Target: p.target, Pool: p.size, CurrentSize: len(p.spares),
		CPU: p.sizes.cpu, Mem: p.sizes.memoryGiB, Disk: p.sizes.diskGiB, OSUser: DefaultUser, Env: map[string]string{},
		CreatedAt: p.createdAt.UTC().Format(timeLayout), UpdatedAt: p.updatedAt.UTC().Format(timeLayout)}
	if p.errorReason != "" {
		d.ErrorReason = &p.errorReason
	}
	return d
}

// createWarmPool is api.json's CreateWarmPool; updateWarmPool its
// UpdateWarmPool. Numbers are float64 to refuse fractions clearly.
type createWarmPool struct {
	Snapshot string   `json:"snapshot"`
	Pool     *float64 `json:"pool"`
	Target   string   `json:"target"`
}

type updateWarmPool struct {
	Pool *float64 `json:"pool"`
}

// poolSize checks a requested size: a whole number from least to
// maxWarmPoolSize.
func poolSize(v *float64, least int) (int, error) {
	if v == nil {
		return 0, errorf(http.StatusBadRequest, "pool is required: the number of warm sandboxes to keep ready (%d to %d)", least, maxWarmPoolSize)
	}
	if *v != math.Trunc(*v) || *v < float64(least) || *v > maxWarmPoolSize {
		return 0, errorf(http.StatusBadRequest, "pool %v is invalid: use a whole number from %d to %d (agentbox serve's cap of a warm pool)", *v, least, maxWarmPoolSize)
	}
	return int(*v), nil
}

// checkSpareQuota refuses a pool of organization org growing to size
// when the spares of all its pools would pass its sandbox quota. Called
// with warmPools.mu held.
func (s *Server) checkSpareQuota(org string, except *warmPool, size int) error {
	if s.maxSandboxes == 0 {
		return nil
	}
	n := size
	for _, p := range s.warm.byID {
		if p.org == org && p != except {
			n += p.size
		}
	}
	if n > s.maxSandboxes {
		return errorf(http.StatusForbidden, "Warm pool quota exceeded: organization %s's warm pools would keep %d spare sandboxes, more than its sandbox quota of %d (agentbox serve --max-sandboxes-per-org): shrink or delete a pool first", org, n, s.maxSandboxes)
	}
	return nil
}

func (s *Server) listWarmPools(w http.ResponseWriter, r *http.Request) error {
	org := orgOf(r)
	s.warm.mu.Lock()
	out := []warmPoolDTO{}
	for _, p := range s.warm.byID {
		if p.org == org {
			out = append(out, p.dto())
		}
	}
	s.warm.mu.Unlock()
	slices.SortFunc(out, func(a, b warmPoolDTO) int { return strings.Compare(a.CreatedAt+a.ID, b.CreatedAt+b.ID) })
	writeJSON(w, out)
	return nil
}

func (s *Server) createWarmPool(w http.ResponseWriter, r *http.Request) error {
	var req createWarmPool
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Snapshot == "" {
		return errorf(http.StatusBadRequest, "snapshot is required: the snapshot (id or name) to keep warm sandboxes of")
	}
	size, err := poolSize(req.Pool, 1)
	if err != nil {
		return err
	}
	org := orgOf(r)
	v, snap, err := s.usableSnapshot(r.Context(), org, req.Snapshot)
	if err != nil {
		return err
	}
	if v.storeName != "" {
		ok, err := s.eng.hasImage(r.Context(), v.storeName)
		if err != nil {
			return err
		}
		if !ok {
			return errorf(http.StatusBadRequest, "Snapshot %s not found in the engine's image store: pull, build or snapshot it first", v.name)
		}
	}
	now := s.now()
	p := &warmPool{id: newID(), org: org, snapshot: v.name, storeName: v.storeName, snapshotID: v.id(), target: req.Target, size: size,
		sizes: sizes{float64(snap.cpu), float64(snap.mem), float64(snap.disk)}, spareSizes: map[string]sizes{}, createdAt: now, updatedAt: now}
	if p.target == "" {
		p.target = DefaultTarget
	}
	s.warm.mu.Lock()
	if err := s.addWarmPool(p); err != nil {
		s.warm.mu.Unlock()
		return err
	}
	write, dto := s.saveWarmPool(p), p.dto()
	s.warm.mu.Unlock()
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording warm pool %s: %w", p.id, err)
	}
	s.warm.poke()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, dto)
	return nil
}

// addWarmPool adds p, new, to the pools after checking that it is the
// organization's only pool of its snapshot and target and fits its
// quota. Called with warmPools.mu held.
func (s *Server) addWarmPool(p *warmPool) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error()}
	}
	for _, o := range s.warm.byID {
		if o.org == p.org && o.snapshot == p.snapshot && o.target == p.target {
			return errorf(http.StatusConflict, "A warm pool of snapshot %s in target %s already exists (%s): update its size instead", p.snapshot, p.target, o.id)
		}
	}
	if err := s.checkSpareQuota(p.org, nil, p.size); err != nil {
		return err
	}
	s.warm.byID[p.id] = p
	return nil
}

// findWarmPool returns organization org's pool id; 404 for any other.
// Called with warmPools.mu held.
func (s *Server) findWarmPool(org, id string) (*warmPool, error) {
	p := s.warm.byID[id]
	if p == nil || p.org != org {
		return nil, errorf(http.StatusNotFound, "Warm pool %s not found", id)
	}
	return p, nil
}

func (s *Server) updateWarmPool(w http.ResponseWriter, r *http.Request) error {
	var req updateWarmPool
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	size, err := poolSize(req.Pool, 0)
	if err != nil {
		return err
	}
	s.warm.mu.Lock()
	p, err := s.findWarmPool(orgOf(r), r.PathValue("id"))
	if err == nil {
		err = s.checkSpareQuota(p.org, p, size)
	}
	if err != nil {
		s.warm.mu.Unlock()
		return err
	}
	p.size, p.updatedAt = size, s.now()
	s.discardSpares(p, len(p.spares)-size)
	write, dto := s.saveWarmPool(p), p.dto()
	s.warm.mu.Unlock()
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording warm pool %s: %w", p.id, err)
	}
	s.warm.poke()
	writeJSON(w, dto)
	return nil
}

func (s *Server) deleteWarmPool(w http.ResponseWriter, r *http.Request) error {
	s.warm.mu.Lock()
	p, err := s.findWarmPool(orgOf(r), r.PathValue("id"))
	if err != nil {
		s.warm.mu.Unlock()
		return err
	}
	delete(s.warm.byID, p.id)
	s.discardSpares(p, len(p.spares))
	write := s.unrecordWarmPool(p)
	s.warm.mu.Unlock()
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: removing the record of warm pool %s: %w", p.id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
