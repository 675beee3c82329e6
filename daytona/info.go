package daytona

import (
	"fmt"
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
	case StateStopped, StateArchived:
		return sandbox.StatusStopped
	case StatePaused:
		return sandbox.StatusPaused
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
		Usage: &sandbox.Usage{
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

// networkInfo describes the policy p of a Daytona sandbox: an allow list
// of names alone is the allowList mode (how Daytona enforces names is its
// own).
func networkInfo(p sandbox.NetworkPolicy) *sandbox.NetworkInfo {
	n := p.Info()
	if n.Mode == sandbox.NetworkDomainAllowList {
		n.Mode = sandbox.NetworkAllowList
	}
	return n
}

// network describes the sandbox's network policy, as the server states
// it (the wire form, read by the one parser; a policy the parser refuses
// is shown as the server wrote it, with a note).
func (s *SandboxDTO) network() *sandbox.NetworkInfo {
	p, err := sandbox.ParseNetworkPolicy(s.NetworkBlockAll, s.NetworkAllowList, s.DomainAllowList)
	if err == nil {
		return networkInfo(p)
	}
	n := &sandbox.NetworkInfo{Mode: sandbox.NetworkAllowList, Note: fmt.Sprintf("the server's policy is not one agentbox accepts: %v", err)}
	if s.NetworkBlockAll {
		n.Mode = sandbox.NetworkBlocked
	}
	n.AllowList = splitList(s.NetworkAllowList)
	n.DomainAllowList = splitList(s.DomainAllowList)
	return n
}
