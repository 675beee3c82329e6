package daytona

import (
	"math"
	"strconv"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Status is the engine-neutral status of a sandbox in state st.
func (st SandboxState) Status() sandbox.Status {
	switch st {
	case StateStarted, StateResizing, StateSnapshotting, StateForking:
		return sandbox.StatusRunning
	case StateStarting, StateRestoring, StateResuming:
		return sandbox.StatusStarting
	case StateStopping, StateArchiving, StatePausing:
		return sandbox.StatusStopping
	case StateStopped, StateArchived, StatePaused:
		return sandbox.StatusStopped
	case StateDestroying:
		return sandbox.StatusDestroying
	case StateDestroyed:
		return sandbox.StatusDestroyed
	case StateError, StateBuildFailed:
		return sandbox.StatusError
	}
	return sandbox.StatusPending // creating, building, pulling, unknown
}

// Info describes the sandbox s as sandbox.Info does, with Daytona's
// sizes in MB (memory and disk are GiB on the wire) and its labels,
// state, snapshot and target as metadata. Its ID is the name it was
// created by (the engine's logical id) unless it has none.
func (s *SandboxDTO) Info() *sandbox.Info {
	id := s.Name
	if id == "" {
		id = s.ID
	}
	info := &sandbox.Info{
		ID: id, Name: "DaytonaSandbox", Provider: "daytona", Status: s.State.Status(),
		CreatedAt: s.Created(), LastUsedAt: s.LastActivity(),
		Resources: &sandbox.Resources{
			CPUCores: s.CPU,
			MemoryMB: int64(math.Round(s.Memory * 1024)),
			DiskMB:   int64(math.Round(s.Disk * 1024)),
		},
		Metadata: map[string]string{"daytonaId": s.ID, "state": string(s.State), "target": s.Target, "public": strconv.FormatBool(s.Public)},
		Identity: &sandbox.Identity{User: s.User},
		Network:  s.network(),
	}
	for k, v := range s.Labels {
		info.Metadata[k] = v
	}
	if s.Snapshot != "" {
		info.Metadata["snapshot"] = s.Snapshot
	}
	if s.ErrorReason != "" {
		info.Metadata["errorReason"] = s.ErrorReason
	}
	return info
}

// network describes the sandbox's network policy.
func (s *SandboxDTO) network() *sandbox.NetworkInfo {
	n := &sandbox.NetworkInfo{Mode: sandbox.NetworkPublic}
	switch {
	case s.NetworkBlockAll:
		n.Mode = sandbox.NetworkBlocked
	case s.NetworkAllowList != "" || s.DomainAllowList != "":
		n.Mode = sandbox.NetworkAllowList
	}
	n.AllowList = splitList(s.NetworkAllowList)
	n.DomainAllowList = splitList(s.DomainAllowList)
	return n
}
