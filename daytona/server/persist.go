package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Persistence of the server's records (store.go): a record is written
// whenever it changes (save), before the answer of the call that changed
// it; a new server reads them all (restore) and resumes the operations
// that were in flight when the last one ended (resume). The sandboxes
// themselves keep running meanwhile: their inits do not depend on the
// server.

// storedSandbox is a sandbox's record as the store keeps it.
type storedSandbox struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Org          string            `json:"organizationId"`
	User         string            `json:"user"`
	Snapshot     string            `json:"snapshot"`
	Target       string            `json:"target"`
	Env          map[string]string `json:"env,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Public       bool              `json:"public,omitempty"`
	PreviewToken string            `json:"previewToken"`
	Network      storedNetwork     `json:"network"`
	Volumes      []volume          `json:"volumes,omitempty"`
	CPU          float64           `json:"cpu,omitempty"`
	MemoryGiB    float64           `json:"memoryGiB,omitempty"`
	DiskGiB      float64           `json:"diskGiB,omitempty"`
	AutoStop     int               `json:"autoStopInterval"`
	AutoArchive  int               `json:"autoArchiveInterval"`
	AutoDelete   int               `json:"autoDeleteInterval"`
	AutoPause    int               `json:"autoPauseInterval,omitempty"`
	TTL          int               `json:"ttlMinutes,omitempty"`
	ForkedFrom   string            `json:"forkedFrom,omitempty"`
	// Secrets are the secrets the sandbox holds, by name; never values.
	Secrets      []secretRef `json:"secrets,omitempty"`
	HadSecrets   bool        `json:"hadSecrets,omitempty"`
	State        string      `json:"state"`
	Desired      string      `json:"desiredState"`
	ErrorReason  string      `json:"errorReason,omitempty"`
	CreatedAt    time.Time   `json:"createdAt"`
	UpdatedAt    time.Time   `json:"updatedAt"`
	StartedAt    time.Time   `json:"startedAt"`
	StoppedAt    time.Time   `json:"stoppedAt"`
	LastActivity time.Time   `json:"lastActivityAt"`
	// Build is the buildInfo the sandbox was made of; its log is not kept.
	Build *storedBuild `json:"build,omitempty"`
}

// storedBuild is a sandbox's build as the store keeps it.
type storedBuild struct {
	Info      createBuildInfo `json:"info"`
	Ref       string          `json:"ref"`
	CreatedAt time.Time       `json:"createdAt"`
}

// storedNetwork is a sandbox's network policy as the store keeps it.
type storedNetwork struct {
	BlockAll        bool   `json:"blockAll,omitempty"`
	AllowList       string `json:"allowList,omitempty"`
	DomainAllowList string `json:"domainAllowList,omitempty"`
}

// storedNetworkOf returns p as the store keeps it: Daytona's wire form,
// as records written before sandbox.NetworkPolicy had it.
func storedNetworkOf(p sandbox.NetworkPolicy) storedNetwork {
	var n storedNetwork
	n.BlockAll, n.AllowList, n.DomainAllowList = p.Wire()
	return n
}

// policy returns the policy n keeps, in canonical form (a record written
// before the lists were stored canonical is read as they were then).
func (n storedNetwork) policy() (sandbox.NetworkPolicy, error) {
	return sandbox.ParseNetworkPolicy(n.BlockAll, n.AllowList, n.DomainAllowList)
}

// stored returns rec as the store keeps it.
func (rec *record) stored() storedSandbox {
	return storedSandbox{
		ID: rec.id, Name: rec.name, Org: rec.org, User: rec.user, Snapshot: rec.snapshot, Target: rec.target,
		Env: rec.env, Labels: rec.labels, Public: rec.public, PreviewToken: rec.previewToken,
		Network: storedNetworkOf(rec.network),
		Volumes: rec.volumes, CPU: rec.sizes.cpu, MemoryGiB: rec.sizes.memoryGiB, DiskGiB: rec.sizes.diskGiB,
		AutoStop: rec.autoStop, AutoArchive: rec.autoArchive, AutoDelete: rec.autoDelete,
		AutoPause: rec.autoPause, TTL: rec.ttl, ForkedFrom: rec.forkedFrom,
		State: rec.state, Desired: rec.desired, ErrorReason: rec.errorReason,
		CreatedAt: rec.createdAt, UpdatedAt: rec.updatedAt, StartedAt: rec.startedAt, StoppedAt: rec.stoppedAt,
		LastActivity: rec.lastActivity, Build: rec.build.stored(),
		Secrets: rec.secrets, HadSecrets: rec.hadSecrets,
	}
}

// stored returns b as the store keeps it; nil for none.
func (b *sandboxBuild) stored() *storedBuild {
	if b == nil {
		return nil
	}
	return &storedBuild{Info: b.info, Ref: b.ref, CreatedAt: b.createdAt}
}

// build returns the build sb keeps, with a log that says it was not kept.
func (sb *storedBuild) build() *sandboxBuild {
	if sb == nil {
		return nil
	}
	l := &buildLog{}
	l.Write([]byte("(the build log of an earlier agentbox serve is not kept)\n"))
	l.close()
	return &sandboxBuild{info: sb.Info, ref: sb.Ref, log: l, createdAt: sb.CreatedAt}
}

// record returns the record ss keeps.
func (ss *storedSandbox) record() *record {
	return &record{
		id: ss.ID, name: ss.Name, org: ss.Org, user: ss.User, snapshot: ss.Snapshot, target: ss.Target,
		env: ss.Env, labels: ss.Labels, public: ss.Public, previewToken: ss.PreviewToken,
		volumes: ss.Volumes, sizes: sizes{ss.CPU, ss.MemoryGiB, ss.DiskGiB},
		autoStop: ss.AutoStop, autoArchive: ss.AutoArchive, autoDelete: ss.AutoDelete,
		autoPause: ss.AutoPause, ttl: ss.TTL, forkedFrom: ss.ForkedFrom,
		state: ss.State, desired: ss.Desired, errorReason: ss.ErrorReason,
		createdAt: ss.CreatedAt, updatedAt: ss.UpdatedAt, startedAt: ss.StartedAt, stoppedAt: ss.StoppedAt,
		lastActivity: ss.LastActivity, build: ss.Build.build(),
		secrets: ss.Secrets, hadSecrets: ss.HadSecrets,
	}
}

// save queues the write of rec to the store if it changed since it was
// last written, with the state changes it had meanwhile, and returns the
// write of rec's latest record (nil when it has none in flight). The
// write is in the order of the saves, which hold s.mu; a call that
// changed rec waits for it (storeWrite.wait) after releasing s.mu and
// before it answers. Called with s.mu held.
func (s *Server) save(rec *record) (*storeWrite, error) {
	if rec.gone {
		return rec.pending, nil
	}
	data, err := json.Marshal(rec.stored())
	if err != nil {
		return nil, fmt.Errorf("agentbox serve: encoding the record of sandbox %s: %w", rec.id, err)
	}
	if bytes.Equal(data, rec.saved) && len(rec.history) == 0 {
		return rec.pending, nil
	}
	hist := rec.history
	rec.pending = s.store.putAsync(bucketSandboxes, rec.id, data, hist, func(err error) {
		s.logf("agentbox serve: recording sandbox %s: %v", rec.id, err)
		// The next save writes the record again, with the state
		// changes this write lost. Not here: the writer must not wait
		// for s.mu, which a caller may hold while it waits for a write.
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if bytes.Equal(rec.saved, data) {
				rec.saved = nil
			}
			rec.history = append(hist, rec.history...)
		}()
	})
	rec.saved, rec.history = data, nil
	if s.writesUnderLock {
		// As before group commit: the write ends before s.mu is
		// released (the benchmarks' baseline).
		_ = rec.pending.wait()
	}
	return rec.pending, nil
}

// persist is save for background work, which has no caller to tell nor
// to wait for the write: a failed write is logged. Called with s.mu held.
func (s *Server) persist(rec *record) {
	if _, err := s.save(rec); err != nil {
		s.logf("%v", err)
	}
}

// unrecord queues the removal of the record of rec, which is gone, from
// the store. Called with s.mu held.
func (s *Server) unrecord(rec *record) {
	rec.gone = true
	id := rec.id
	rec.pending = s.store.removeAsync(bucketSandboxes, id, func(err error) {
		s.logf("agentbox serve: removing the record of sandbox %s: %v", id, err)
	})
}

// restore reads the records of the store into s, and resumes the
// operations that were in flight when the last server ended.
func (s *Server) restore(ctx context.Context) error {
	err := s.store.each(bucketVolumes, func(id string, data []byte) error {
		var sv storedVolume
		if err := json.Unmarshal(data, &sv); err != nil {
			return fmt.Errorf("volume %s: %w", id, err)
		}
		v := sv.record()
		s.volumes[v.id], s.volumesByName[nameKey(v.org, v.name)] = v, v
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentbox serve: reading the records: %w", err)
	}
	if err := s.restoreSnapshots(); err != nil {
		return err
	}
	var recs []*record
	err = s.store.each(bucketSandboxes, func(id string, data []byte) error {
		var ss storedSandbox
		if err := json.Unmarshal(data, &ss); err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
		rec := ss.record()
		var err error
		if rec.network, err = ss.Network.policy(); err != nil {
			// The engine refused such policies: the record is corrupt.
			return fmt.Errorf("sandbox %s: the network policy: %w", id, err)
		}
		rec.saved = data
		s.byID[rec.id], s.byName[nameKey(rec.org, rec.name)] = rec, rec
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentbox serve: reading the records: %w", err)
	}
	for _, rec := range recs {
		s.resume(ctx, rec)
	}
	return nil
}

// errInterruptedBuild is why a sandbox whose build a server's end
// interrupted is in the build_failed state.
var errInterruptedBuild = errors.New("agentbox serve ended during the build: delete the sandbox and create it again")

// errInterruptedCreate is why a sandbox whose creation a server's end
// interrupted, and whose creation again failed, is in the error state.
var errInterruptedCreate = errors.New("agentbox serve ended while it created the sandbox, and creating it again failed: delete it and create it again")

// errInterruptedFork is why a fork whose copy a server's end interrupted
// is in the error state.
var errInterruptedFork = errors.New("agentbox serve ended while it forked the sandbox: delete the fork and fork its source again")

// resume brings rec, just restored, up to date with its sandbox when an
// operation on it was in flight (its state differs from its desired
// state): the state becomes what the engine says, and the operation runs
// again towards the desired state. The reconciler does the rest.
func (s *Server) resume(ctx context.Context, rec *record) {
	if rec.errored() || rec.state == rec.desired {
		return
	}
	st, err := s.eng.status(ctx, rec.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.persist(rec)
	was, desired := rec.state, rec.desired
	switch {
	case errNotFound(err) && (was == statePendingBuild || was == stateBuildingSnapshot):
		s.fail(rec, "creating the sandbox", &buildError{errInterruptedBuild})
		return
	case errNotFound(err) && was == stateCreating && rec.forkedFrom != "":
		// A fork cannot be made again from a record: the source has
		// changed since.
		s.fail(rec, "forking the sandbox", errInterruptedFork)
		return
	case errNotFound(err) && was == stateCreating:
		if err := s.recreate(ctx, rec); err != nil {
			s.fail(rec, "creating the sandbox", fmt.Errorf("%w: %w", errInterruptedCreate, err))
		}
		return
	case errNotFound(err):
		s.forget(rec)
		return
	case err != nil:
		s.fail(rec, "looking at the sandbox after a restart", err)
		return
	}
	now := s.now()
	switch {
	case st.paused:
		s.set(rec, statePaused, statePaused)
	case st.running:
		if rec.startedAt.IsZero() {
			rec.startedAt = now
		}
		s.set(rec, stateStarted, stateStarted)
	case was == stateRestoring || was == stateArchiving:
		s.set(rec, stateArchived, stateArchived)
	default:
		if rec.stoppedAt.IsZero() {
			rec.stoppedAt = now
		}
		s.set(rec, stateStopped, stateStopped)
	}
	var begin func(*record) error
	switch {
	case desired == stateDestroyed:
		begin = s.beginDestroy
	case desired == stateStarted && !st.running:
		begin = s.beginStart
	case desired == statePaused && st.running:
		begin = s.beginAutoPause
	case desired == stateStopped && st.running:
		begin = s.beginStop
	case desired == stateArchived && rec.state == stateStopped:
		begin = s.beginArchive
	default:
		return
	}
	if err := begin(rec); err != nil {
		s.logf("agentbox serve: sandbox %s: resuming the change from %s to %s: %v", rec.id, was, desired, err)
	}
}

// recreate creates rec's sandbox again, from its record, after a server's
// end interrupted its creation before the engine had it. Called with s.mu
// held.
func (s *Server) recreate(ctx context.Context, rec *record) error {
	sp, err := s.specOf(ctx, rec)
	if err != nil {
		return err
	}
	// What the interrupted creation left goes first.
	if err := s.eng.remove(ctx, rec.id); err != nil && !errNotFound(err) {
		return err
	}
	start, err := s.eng.create(rec.id, sp)
	if err != nil {
		return err
	}
	return s.beginCreate(rec, start)
}
