package server

import (
	"maps"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Sandbox states and desired states, as api.json's SandboxState and
// SandboxDesiredState spell them (those the server uses).
const (
	stateCreating   = "creating"
	stateStarting   = "starting"
	stateStarted    = "started"
	stateStopping   = "stopping"
	stateStopped    = "stopped"
	stateDestroying = "destroying"
	stateArchiving  = "archiving"
	stateArchived   = "archived"
	stateRestoring  = "restoring"
	stateDestroyed  = "destroyed"
	stateError      = "error"
	stateBuildFail  = "build_failed"

	statePendingBuild     = "pending_build"
	stateBuildingSnapshot = "building_snapshot"
)

// sandboxStates are every value of api.json's SandboxState, which list
// filters accept.
var sandboxStates = []string{
	"creating", "restoring", "destroyed", "destroying", "started", "stopped", "starting", "stopping",
	"error", "build_failed", "pending_build", "building_snapshot", "unknown", "pulling_snapshot",
	"archived", "archiving", "resizing", "snapshotting", "forking", "pausing", "paused", "resuming",
}

// A record is the server's view of one sandbox. Its fields are guarded by
// the Server's mutex.
type record struct {
	id, name, org string
	user          string
	snapshot      string
	target        string
	env           map[string]string
	labels        map[string]string
	public        bool
	previewToken  string
	network       sandbox.NetworkPolicy
	volumes       []volume
	sizes         sizes
	build         *sandboxBuild // nil unless created from buildInfo
	// Intervals in minutes, with Daytona's meaning: autoStop 0 never;
	// autoDelete < 0 never, 0 as soon as stopped.
	autoStop, autoArchive, autoDelete int
	// autoPause is the auto-pause interval in minutes (0 never); ttl
	// the minutes after createdAt the sandbox is deleted (0 never);
	// forkedFrom the id of the sandbox it was forked from (pause.go,
	// fork.go).
	autoPause, ttl int
	forkedFrom     string
	// secrets are the secrets the sandbox holds, by name, sorted by
	// variable; hadSecrets is set once it has held any, so that a start
	// after they were all detached detaches them in the engine too
	// (secretsandbox.go).
	secrets    []secretRef
	hadSecrets bool

	state, desired string
	errorReason    string
	// busy is set while an engine operation on the sandbox runs: the
	// state is then transitional and other lifecycle calls get 409.
	busy bool

	createdAt, updatedAt time.Time
	startedAt, stoppedAt time.Time
	lastActivity         time.Time

	// saved is the record as the store has (or is about to have) it
	// (persist.go), history the state changes not queued to it yet,
	// pending the latest write of the record queued; gone is set once
	// the sandbox is forgotten, whose record must not be written again.
	saved   []byte
	history []historyEntry
	pending *storeWrite
	gone    bool
}

// touch records a change at now.
func (rec *record) touch(now time.Time) { rec.updatedAt = now }

// errored reports whether the sandbox is in a failed state that start and
// stop refuse.
func (rec *record) errored() bool { return rec.state == stateError || rec.state == stateBuildFail }

// item returns the sandbox as GET /sandbox lists it; proxyURL is the
// toolbox proxy URL clients use.
func (rec *record) item(proxyURL string) sandboxListItem {
	it := sandboxListItem{
		ID:                  rec.id,
		OrganizationID:      rec.org,
		Name:                rec.name,
		Target:              rec.target,
		SandboxClass:        "container",
		State:               rec.state,
		DesiredState:        rec.desired,
		Snapshot:            rec.snapshot,
		User:                rec.user,
		ErrorReason:         rec.errorReason,
		Public:              rec.public,
		NetworkBlockAll:     rec.network.Mode == sandbox.NetworkBlocked,
		NetworkAllowList:    rec.network.AllowListString(),
		DomainAllowList:     rec.network.DomainAllowListString(),
		CPU:                 rec.sizes.cpu,
		Memory:              rec.sizes.memoryGiB,
		Disk:                rec.sizes.diskGiB,
		Labels:              maps.Clone(rec.labels),
		AutoStopInterval:    rec.autoStop,
		AutoArchiveInterval: rec.autoArchive,
		AutoDeleteInterval:  rec.autoDelete,
		AutoPauseInterval:   rec.autoPause,
		AutoDestroyAt:       rec.autoDestroyAt(),
		CreatedAt:           rec.createdAt.UTC().Format(timeLayout),
		UpdatedAt:           rec.updatedAt.UTC().Format(timeLayout),
		ToolboxProxyURL:     proxyURL,
	}
	if it.Labels == nil {
		it.Labels = map[string]string{}
	}
	if rec.errored() {
		no := false
		it.Recoverable = &no
	}
	if !rec.lastActivity.IsZero() {
		it.LastActivityAt = rec.lastActivity.UTC().Format(timeLayout)
	}
	return it
}

// dto returns the sandbox as GET /sandbox/{id} answers it.
func (rec *record) dto(proxyURL string) sandboxDTO {
	d := sandboxDTO{sandboxListItem: rec.item(proxyURL), Env: maps.Clone(rec.env), Volumes: rec.volumes, BuildInfo: rec.build.dto()}
	if d.Env == nil {
		d.Env = map[string]string{}
	}
	if d.Volumes == nil {
		d.Volumes = []volume{}
	}
	return d
}
