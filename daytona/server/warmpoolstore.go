package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Persistence of the warm pools (warmpool.go): a pool's record is written
// whenever it or its spares change, so that a new server keeps the same
// pools at the same sizes, takes back the spares that still run and
// removes those whose creation the last server's end cut short.

// bucketWarmPools holds the pools' records, by id.
var bucketWarmPools = []byte("warmpools")

// storedWarmPool is a pool's record as the store keeps it.
type storedWarmPool struct {
	ID        string    `json:"id"`
	Org       string    `json:"organizationId"`
	Snapshot  string    `json:"snapshot"`
	StoreName string    `json:"storeName,omitempty"`
	SnapID    string    `json:"snapshotId"`
	Target    string    `json:"target"`
	Size      int       `json:"pool"`
	CPU       float64   `json:"cpu,omitempty"`
	MemoryGiB float64   `json:"memoryGiB,omitempty"`
	DiskGiB   float64   `json:"diskGiB,omitempty"`
	Spares    []string  `json:"spares,omitempty"`
	Starting  []string  `json:"starting,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// saveWarmPool queues the write of p's record and returns it. Called
// with warmPools.mu held, which orders the writes of a pool.
func (s *Server) saveWarmPool(p *warmPool) *storeWrite {
	data, err := json.Marshal(storedWarmPool{
		ID: p.id, Org: p.org, Snapshot: p.snapshot, StoreName: p.storeName, SnapID: p.snapshotID, Target: p.target, Size: p.size,
		CPU: p.sizes.cpu, MemoryGiB: p.sizes.memoryGiB, DiskGiB: p.sizes.diskGiB,
		Spares: p.spares, Starting: p.starting, CreatedAt: p.createdAt, UpdatedAt: p.updatedAt,
	})
	if err != nil {
		// Plain data: cannot happen.
		s.logf("agentbox serve: encoding the record of warm pool %s: %v", p.id, err)
		return nil
	}
	id := p.id
	return s.store.putAsync(bucketWarmPools, id, data, nil, func(err error) {
		s.logf("agentbox serve: recording warm pool %s: %v", id, err)
	})
}

// unrecordWarmPool queues the removal of p's record. Called with
// warmPools.mu held.
func (s *Server) unrecordWarmPool(p *warmPool) *storeWrite {
	id := p.id
	return s.store.removeAsync(bucketWarmPools, id, func(err error) {
		s.logf("agentbox serve: removing the record of warm pool %s: %v", id, err)
	})
}

// startWarmPools reads the pools' records, takes back the spares that
// still run, removes the others (and those a sandbox's record has taken
// meanwhile keeps), and starts the filler. Called once, by newServer,
// after the sandboxes' records are restored.
func (s *Server) startWarmPools(ctx context.Context) error {
	s.warm.byID, s.warm.wake = map[string]*warmPool{}, make(chan struct{}, 1)
	var pools []storedWarmPool
	err := s.store.each(bucketWarmPools, func(id string, data []byte) error {
		var sp storedWarmPool
		if err := json.Unmarshal(data, &sp); err != nil {
			return fmt.Errorf("warm pool %s: %w", id, err)
		}
		pools = append(pools, sp)
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentbox serve: reading the records: %w", err)
	}
	for _, sp := range pools {
		p := &warmPool{id: sp.ID, org: sp.Org, snapshot: sp.Snapshot, storeName: sp.StoreName, snapshotID: sp.SnapID, target: sp.Target, size: sp.Size,
			sizes: sizes{sp.CPU, sp.MemoryGiB, sp.DiskGiB}, spareSizes: map[string]sizes{}, createdAt: sp.CreatedAt, updatedAt: sp.UpdatedAt}
		s.adoptSpares(ctx, p, sp.Spares, sp.Starting)
		s.warm.mu.Lock()
		s.warm.byID[p.id] = p
		s.saveWarmPool(p)
		s.warm.mu.Unlock()
	}
	s.wg.Go(s.fillWarmPools)
	return nil
}

// adoptSpares makes the spares of p's record that still run ready again,
// up to p's size, and removes the rest but those a sandbox's record now
// has (taken just before the last server ended).
func (s *Server) adoptSpares(ctx context.Context, p *warmPool, ready, starting []string) {
	s.mu.Lock()
	taken := func(id string) bool { return s.byID[id] != nil }
	var drop []string
	for _, id := range starting {
		if !taken(id) {
			drop = append(drop, id)
		}
	}
	var check []string
	for _, id := range ready {
		if !taken(id) {
			check = append(check, id)
		}
	}
	s.mu.Unlock()
	for _, id := range check {
		st, err := s.eng.status(ctx, id)
		if err != nil || !st.running || len(p.spares) >= p.size {
			drop = append(drop, id)
			continue
		}
		p.spares, p.spareSizes[id] = append(p.spares, id), p.sizes
	}
	s.removeSpares(drop...)
}
