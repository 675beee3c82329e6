package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The spares of the warm pools (warmpool.go): the filler creates them,
// a create takes one, a shrink or delete of a pool removes them.

// warmRetry is how long after a spare's creation failed its pool tries
// again.
const warmRetry = 5 * time.Second

// spareRemoveTimeout bounds the removal of one spare.
const spareRemoveTimeout = time.Minute

// spareSpec is what the spares of p are created with: the snapshot, the
// default user, the snapshot's sizes, nothing else.
func (p *warmPool) spareSpec(id string) spec {
	return spec{name: id, user: DefaultUser, image: p.storeName, resources: p.sizes.resources()}
}

// fillWarmPools is the filler: it creates the spares the pools lack, one
// at a time, until the server closes.
func (s *Server) fillWarmPools() {
	for {
		wait := s.fillOne()
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-s.timers.Done():
			t.Stop()
			return
		case <-s.warm.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// fillOne creates one spare of a pool that lacks one and returns 0, or,
// when none does, how long to wait before looking again.
func (s *Server) fillOne() time.Duration {
	if s.timers.Err() != nil {
		return time.Hour
	}
	s.warm.mu.Lock()
	now, wait := s.now(), time.Hour
	var p *warmPool
	for _, q := range s.warm.byID {
		if len(q.spares)+len(q.starting) >= q.size {
			continue
		}
		if d := q.retryAt.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		p = q
		break
	}
	if p == nil {
		s.warm.mu.Unlock()
		return wait
	}
	id := newID()
	p.starting = append(p.starting, id)
	// Recorded before it exists: a server that ends meanwhile leaves an
	// id the next one removes.
	write, sp := s.saveWarmPool(p), p.spareSpec(id)
	s.warm.mu.Unlock()
	if err := write.wait(); err != nil {
		s.logf("agentbox serve: recording warm pool %s: %v", p.id, err)
	}
	sz, err := s.makeSpare(id, sp)
	s.spareMade(p, id, sz, err)
	return 0
}

// makeSpare creates and starts spare id with sp.
func (s *Server) makeSpare(id string, sp spec) (sizes, error) {
	start, err := s.eng.create(id, sp)
	if err != nil {
		return sizes{}, err
	}
	return start(s.timers)
}

// spareMade files spare id of p, whose creation ended with err: ready, or
// removed when it failed or p no longer wants it.
func (s *Server) spareMade(p *warmPool, id string, sz sizes, err error) {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	p.starting = slices.DeleteFunc(p.starting, func(x string) bool { return x == id })
	wanted := s.warm.byID[p.id] == p && len(p.spares) < p.size
	switch {
	case err != nil:
		if s.timers.Err() == nil {
			p.errorReason, p.retryAt = fmt.Sprintf("creating a warm sandbox: %v", err), s.now().Add(warmRetry)
			s.logf("agentbox serve: warm pool %s: %v", p.id, err)
		}
		s.removeSpares(id)
	case !wanted:
		s.removeSpares(id)
	default:
		p.errorReason = ""
		sz = sz.or(p.sizes)
		p.spares, p.spareSizes[id], p.sizes = append(p.spares, id), sz, sz
	}
	if s.warm.byID[p.id] == p {
		s.saveWarmPool(p)
	}
}

// discardSpares removes the n oldest ready spares of p (none when n <= 0)
// in the background. Called with warmPools.mu held.
func (s *Server) discardSpares(p *warmPool, n int) {
	if n <= 0 {
		return
	}
	ids := slices.Clone(p.spares[:n])
	p.spares = slices.Delete(p.spares, 0, n)
	for _, id := range ids {
		delete(p.spareSizes, id)
	}
	s.removeSpares(ids...)
}

// removeSpares removes the engine's sandboxes ids in the background;
// Close waits for it.
func (s *Server) removeSpares(ids ...string) {
	if len(ids) == 0 {
		return
	}
	s.wg.Go(func() {
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), spareRemoveTimeout)
			if err := s.eng.remove(ctx, id); err != nil && !errNotFound(err) {
				s.logf("agentbox serve: removing warm sandbox %s: %v", id, err)
			}
			cancel()
		}
	})
}

// spareFits reports whether a create of rec with sp, as req asks, can
// take a spare of p: the same organization and snapshot, the default
// user, no environment, volumes, secrets or build, the toolbox's normal mode, and
// the sizes the spares have (or none asked). The language label is
// informational to the local engine; the network policy is applied to
// the spare once taken.
func spareFits(p *warmPool, rec *record, sp spec, req *createSandbox) bool {
	snap := req.Snapshot
	if snap == "" {
		snap = DefaultSnapshot
	}
	if p.org != rec.org || (snap != p.snapshot && snap != p.snapshotID) {
		return false
	}
	if req.BuildInfo != nil || rec.user != DefaultUser || len(rec.env) > 0 || len(rec.volumes) > 0 || sp.daytonaToolbox || len(rec.secrets) > 0 {
		return false
	}
	if req.Target != "" && req.Target != p.target {
		return false
	}
	for _, c := range []struct {
		asked *int
		has   float64
	}{{req.CPU, p.sizes.cpu}, {req.Memory, p.sizes.memoryGiB}, {req.Disk, p.sizes.diskGiB}} {
		if c.asked != nil && float64(*c.asked) != c.has {
			return false
		}
	}
	return true
}

// takeSpare takes a ready spare of a pool that fits the create of rec
// with sp; ok is false when there is none.
func (s *Server) takeSpare(rec *record, sp spec, req *createSandbox) (p *warmPool, id string, sz sizes, ok bool) {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	for _, q := range s.warm.byID {
		if len(q.spares) > 0 && spareFits(q, rec, sp, req) {
			id = q.spares[0]
			q.spares = q.spares[1:]
			sz = q.spareSizes[id]
			delete(q.spareSizes, id)
			return q, id, sz, true
		}
	}
	return nil, "", sizes{}, false
}

// takeRunningSpare is takeSpare of a spare that still runs: one that
// ended behind the server's back is removed, and the next is tried.
func (s *Server) takeRunningSpare(ctx context.Context, rec *record, sp spec, req *createSandbox) (*warmPool, string, sizes, bool) {
	for {
		p, id, sz, ok := s.takeSpare(rec, sp, req)
		if !ok {
			return nil, "", sizes{}, false
		}
		st, err := s.eng.status(ctx, id)
		if err == nil && st.running {
			return p, id, sz, true
		}
		s.logf("agentbox serve: warm sandbox %s no longer runs (%v): removed", id, err)
		s.removeSpares(id)
		s.warm.poke()
	}
}

// giveBack returns spare id, taken from p by a create that failed
// before the sandbox was recorded, to p (or removes it when p no longer
// wants it).
func (s *Server) giveBack(p *warmPool, id string, sz sizes) {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	if s.warm.byID[p.id] != p || len(p.spares) >= p.size {
		s.removeSpares(id)
		return
	}
	p.spares = append([]string{id}, p.spares...)
	p.spareSizes[id] = sz
}

// createFromWarmPool answers the create of rec with sp, as req asks, with
// a spare of a warm pool when one fits: done is false when none does,
// and the create goes on as without pools.
func (s *Server) createFromWarmPool(w http.ResponseWriter, r *http.Request, rec *record, sp spec, req *createSandbox) (done bool, err error) {
	p, id, sz, ok := s.takeRunningSpare(r.Context(), rec, sp, req)
	if !ok {
		return false, nil
	}
	if !rec.network.Equal(sandbox.NetworkPolicy{Mode: sandbox.NetworkPublic}) {
		if err := s.eng.setNetwork(r.Context(), id, rec.network); err != nil {
			s.logf("agentbox serve: warm sandbox %s: applying the network policy: %v", id, err)
			s.removeSpares(id)
			s.warm.poke()
			return false, nil
		}
	}
	if rec.name == rec.id {
		rec.name = id
	}
	rec.id, rec.snapshot, rec.sizes = id, p.snapshot, sz
	dto, write, err := s.addTaken(rec, s.toolboxProxyURL(r))
	if err != nil {
		s.giveBack(p, id, sz)
		return true, err
	}
	s.warm.mu.Lock()
	if s.warm.byID[p.id] == p {
		s.saveWarmPool(p)
	}
	s.warm.mu.Unlock()
	s.warm.poke()
	if err := write.wait(); err != nil {
		return true, fmt.Errorf("agentbox serve: recording sandbox %s: %w", rec.id, err)
	}
	writeJSON(w, dto)
	return true, nil
}

// addTaken adds rec, a new sandbox whose spare is started already, to
// the server, as addRecord does a sandbox to create. Its record's write
// is queued before its pool's, which no longer lists it: a restart
// between the two finds the sandbox's record, and the pool gives the
// spare up.
func (s *Server) addTaken(rec *record, proxyURL string) (sandboxDTO, *storeWrite, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return sandboxDTO{}, nil, &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error()}
	}
	if err := s.checkAddable(rec); err != nil {
		return sandboxDTO{}, nil, err
	}
	now := s.now()
	s.set(rec, stateStarted, stateStarted)
	rec.startedAt, rec.lastActivity = now, now
	return s.insert(rec, proxyURL)
}
