package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Persistence of the snapshots' records (snapshots.go): a record is
// written whenever it changes, with its build log as it is then, so that
// a new server lists, gets and shows the build logs of the same
// snapshots; a build that the server's end cut short ends build_failed
// (errInterruptedSnapshot), as a sandbox's does.

// storedSnapshot is a snapshot's record as the store keeps it.
type storedSnapshot struct {
	// Org is the organization of the snapshot; "" in records of older
	// servers, whose snapshots were the server's organization's.
	Org         string           `json:"org,omitempty"`
	Name        string           `json:"name"`
	ImageName   string           `json:"imageName,omitempty"`
	BuildInfo   *createBuildInfo `json:"buildInfo,omitempty"`
	State       string           `json:"state"`
	ErrorReason string           `json:"errorReason,omitempty"`
	CPU         int              `json:"cpu,omitempty"`
	GPU         int              `json:"gpu,omitempty"`
	Mem         int              `json:"mem,omitempty"`
	Disk        int              `json:"disk,omitempty"`
	Entrypoint  []string         `json:"entrypoint,omitempty"`
	CreatedAt   time.Time        `json:"createdAt"`
	UpdatedAt   time.Time        `json:"updatedAt"`
	LastUsedAt  time.Time        `json:"lastUsedAt"`
	// Log is the build log; nil when the server did not build the
	// snapshot. Only its last maxStoredLog bytes are kept.
	Log *string `json:"log,omitempty"`
}

// maxStoredLog bounds the build log a snapshot's record keeps.
const maxStoredLog = 1 << 20

// errInterruptedSnapshot is why a snapshot whose build a server's end
// interrupted is in the build_failed state.
var errInterruptedSnapshot = errors.New("agentbox serve ended during the build: delete the snapshot and create it again")

// saveSnapshot queues the write of rec to the store and returns it.
// Called with s.snapshots.mu held, which orders the writes of a record.
func (s *Server) saveSnapshot(rec *snapshotRecord) *storeWrite {
	ss := storedSnapshot{
		Org: rec.org, Name: rec.name, ImageName: rec.imageName, BuildInfo: rec.buildInfo, State: rec.state, ErrorReason: rec.errorReason,
		CPU: rec.cpu, GPU: rec.gpu, Mem: rec.mem, Disk: rec.disk, Entrypoint: rec.entrypoint,
		CreatedAt: rec.createdAt, UpdatedAt: rec.updatedAt, LastUsedAt: rec.lastUsedAt,
	}
	if rec.log != nil {
		data, _, _, _ := rec.log.read(0)
		if len(data) > maxStoredLog {
			data = append([]byte("(the start of the build log is not kept)\n"), data[len(data)-maxStoredLog:]...)
		}
		log := string(data)
		ss.Log = &log
	}
	data, err := json.Marshal(ss)
	if err != nil {
		// Every field is plain data: cannot happen.
		s.logf("agentbox serve: encoding the record of snapshot %s: %v", rec.name, err)
		return nil
	}
	name := rec.name
	return s.store.putAsync(bucketSnapshots, snapKey(rec.org, name), data, nil, func(err error) {
		s.logf("agentbox serve: recording snapshot %s: %v", name, err)
	})
}

// unrecordSnapshot queues the removal of the record of organization
// org's snapshot name. Called with s.snapshots.mu held.
func (s *Server) unrecordSnapshot(org, name string) *storeWrite {
	return s.store.removeAsync(bucketSnapshots, snapKey(org, name), func(err error) {
		s.logf("agentbox serve: removing the record of snapshot %s: %v", name, err)
	})
}

// restoreSnapshots reads the snapshots' records of the store; those whose
// build was in flight end build_failed.
func (s *Server) restoreSnapshots() error {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	recs := s.snapshots.records()
	var cut, moved []*snapshotRecord
	var oldKeys []string
	err := s.store.each(bucketSnapshots, func(name string, data []byte) error {
		var ss storedSnapshot
		if err := json.Unmarshal(data, &ss); err != nil {
			return fmt.Errorf("snapshot %s: %w", name, err)
		}
		rec := &snapshotRecord{
			org: ss.Org, name: ss.Name, imageName: ss.ImageName, buildInfo: ss.BuildInfo, state: ss.State, errorReason: ss.ErrorReason,
			cpu: ss.CPU, gpu: ss.GPU, mem: ss.Mem, disk: ss.Disk, entrypoint: ss.Entrypoint,
			createdAt: ss.CreatedAt, updatedAt: ss.UpdatedAt, lastUsedAt: ss.LastUsedAt,
		}
		if ss.Log != nil {
			rec.log = &buildLog{data: []byte(*ss.Log), done: true}
		}
		switch rec.state {
		case snapshotPending, snapshotBuilding, snapshotPulling:
			cut = append(cut, rec)
		}
		if rec.org == "" {
			// An older server's: of the server's organization, now
			// under the organization's key.
			rec.org = s.org
			moved, oldKeys = append(moved, rec), append(oldKeys, name)
		}
		recs[snapKey(rec.org, rec.name)] = rec
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentbox serve: reading the records: %w", err)
	}
	for i, rec := range moved {
		if err := s.saveSnapshot(rec).wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording snapshot %s: %w", rec.name, err)
		}
		if err := s.store.removeAsync(bucketSnapshots, oldKeys[i], nil).wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording snapshot %s: %w", rec.name, err)
		}
	}
	for _, rec := range cut {
		if rec.log == nil {
			rec.log = &buildLog{done: true}
		}
		rec.log.data = append(rec.log.data, "Build failed: "+errInterruptedSnapshot.Error()+"\n"...)
		rec.state, rec.errorReason, rec.updatedAt = snapshotBuildFailed, errInterruptedSnapshot.Error(), s.now()
		if err := s.saveSnapshot(rec).wait(); err != nil {
			return fmt.Errorf("agentbox serve: recording snapshot %s: %w", rec.name, err)
		}
	}
	return nil
}
