package daytona

import (
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The shapes of api.json this package uses. Every enumeration is an open
// string type: a value the service adds later decodes as it is. Unknown
// fields are ignored.

// SandboxState is a sandbox's state (api.json SandboxState).
type SandboxState string

// Sandbox states.
const (
	StateCreating         SandboxState = "creating"
	StateRestoring        SandboxState = "restoring"
	StateDestroyed        SandboxState = "destroyed"
	StateDestroying       SandboxState = "destroying"
	StateStarted          SandboxState = "started"
	StateStopped          SandboxState = "stopped"
	StateStarting         SandboxState = "starting"
	StateStopping         SandboxState = "stopping"
	StateError            SandboxState = "error"
	StateBuildFailed      SandboxState = "build_failed"
	StatePendingBuild     SandboxState = "pending_build"
	StateBuildingSnapshot SandboxState = "building_snapshot"
	StateUnknown          SandboxState = "unknown"
	StatePullingSnapshot  SandboxState = "pulling_snapshot"
	StateArchived         SandboxState = "archived"
	StateArchiving        SandboxState = "archiving"
	StateResizing         SandboxState = "resizing"
	StateSnapshotting     SandboxState = "snapshotting"
	StateForking          SandboxState = "forking"
	StatePausing          SandboxState = "pausing"
	StatePaused           SandboxState = "paused"
	StateResuming         SandboxState = "resuming"
)

// Failed reports whether s is a state a sandbox does not leave by itself:
// error or build_failed.
func (s SandboxState) Failed() bool { return s == StateError || s == StateBuildFailed }

// Transitional reports whether s is a state on the way to another.
func (s SandboxState) Transitional() bool {
	switch s {
	case StateCreating, StateRestoring, StateDestroying, StateStarting, StateStopping, StatePendingBuild,
		StateBuildingSnapshot, StateUnknown, StatePullingSnapshot, StateArchiving, StateResizing,
		StateSnapshotting, StateForking, StatePausing, StateResuming:
		return true
	}
	return false
}

// SandboxDTO is a sandbox as the API describes it (api.json Sandbox; a list
// gives SandboxListItem, the same without Env, Volumes and BuildInfo).
type SandboxDTO struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	Target              string            `json:"target"`
	CPU                 float64           `json:"cpu"`
	GPU                 float64           `json:"gpu"`
	Memory              float64           `json:"memory"` // GiB
	Disk                float64           `json:"disk"`   // GiB
	State               SandboxState      `json:"state,omitempty"`
	DesiredState        string            `json:"desiredState,omitempty"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable,omitempty"`
	AutoStopInterval    int               `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval int               `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval,omitempty"`
	Volumes             []SandboxVolume   `json:"volumes,omitempty"`
	BuildInfo           *BuildInfo        `json:"buildInfo,omitempty"`
	CreatedAt           string            `json:"createdAt,omitempty"`
	UpdatedAt           string            `json:"updatedAt,omitempty"`
	LastActivityAt      string            `json:"lastActivityAt,omitempty"`
	SandboxClass        string            `json:"sandboxClass,omitempty"`
	DaemonVersion       string            `json:"daemonVersion,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// Created returns when the sandbox was created; zero when unknown.
func (s *SandboxDTO) Created() time.Time { return parseTime(s.CreatedAt) }

// LastActivity returns the sandbox's last activity; zero when unknown.
func (s *SandboxDTO) LastActivity() time.Time { return parseTime(s.LastActivityAt) }

// parseTime parses an API time, leniently: zero when it is not RFC 3339.
func parseTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// SandboxVolume is a volume mounted in a sandbox.
type SandboxVolume struct {
	// VolumeID is the volume's id or name.
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

// BuildInfo says how a sandbox's or snapshot's image was built.
type BuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
	SnapshotRef       string   `json:"snapshotRef,omitempty"`
}

// CreateBuildInfo is the image of a create: a Dockerfile. An image name X
// is "FROM X\n".
type CreateBuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
}

// CreateSandbox is the body of a create (api.json CreateSandbox). Unset
// fields are left to the server.
type CreateSandbox struct {
	Name             string            `json:"name,omitempty"`
	Snapshot         string            `json:"snapshot,omitempty"`
	User             string            `json:"user,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Public           bool              `json:"public,omitempty"`
	NetworkBlockAll  bool              `json:"networkBlockAll,omitempty"`
	NetworkAllowList string            `json:"networkAllowList,omitempty"`
	DomainAllowList  string            `json:"domainAllowList,omitempty"`
	Target           string            `json:"target,omitempty"`
	// CPU (cores), Memory and Disk (GiB) count only with BuildInfo.
	CPU    int `json:"cpu,omitempty"`
	GPU    int `json:"gpu,omitempty"`
	Memory int `json:"memory,omitempty"`
	Disk   int `json:"disk,omitempty"`
	// Intervals in minutes. AutoStopInterval 0: never; AutoDeleteInterval
	// 0: as soon as stopped, negative: never.
	AutoStopInterval    *int             `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int             `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int             `json:"autoDeleteInterval,omitempty"`
	Volumes             []SandboxVolume  `json:"volumes,omitempty"`
	BuildInfo           *CreateBuildInfo `json:"buildInfo,omitempty"`
	// Secrets are one-key maps, environment variable → secret name.
	Secrets []map[string]string `json:"secrets,omitempty"`
}

// NetworkSettings changes a sandbox's network policy; nil fields keep
// their values.
type NetworkSettings struct {
	NetworkBlockAll  *bool   `json:"networkBlockAll,omitempty"`
	NetworkAllowList *string `json:"networkAllowList,omitempty"`
	DomainAllowList  *string `json:"domainAllowList,omitempty"`
}

// NetworkSettingsOf returns the settings that set the policy p as a
// whole: Daytona's wire form of it, every field present.
func NetworkSettingsOf(p sandbox.NetworkPolicy) NetworkSettings {
	blockAll, allowList, domainAllowList := p.Wire()
	return NetworkSettings{NetworkBlockAll: &blockAll, NetworkAllowList: &allowList, DomainAllowList: &domainAllowList}
}

// PreviewURL is the URL of a sandbox's port; send Token as
// X-Daytona-Preview-Token unless the sandbox is public.
type PreviewURL struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// SignedPreviewURL is a preview URL that carries its token.
type SignedPreviewURL struct {
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	URL       string `json:"url"`
}

// ServerConfig is what GET /config says about the deployment (api.json
// DaytonaConfiguration, the fields used).
type ServerConfig struct {
	Version                string `json:"version"`
	ProxyTemplateURL       string `json:"proxyTemplateUrl"`
	ProxyToolboxURL        string `json:"proxyToolboxUrl"`
	DefaultSnapshot        string `json:"defaultSnapshot"`
	DashboardURL           string `json:"dashboardUrl"`
	MaxAutoArchiveInterval int    `json:"maxAutoArchiveInterval"`
	Environment            string `json:"environment"`
}

// VolumeState is a volume's state (api.json VolumeState).
type VolumeState string

// Volume states.
const (
	VolumeCreating      VolumeState = "creating"
	VolumeReady         VolumeState = "ready"
	VolumePendingCreate VolumeState = "pending_create"
	VolumePendingDelete VolumeState = "pending_delete"
	VolumeDeleting      VolumeState = "deleting"
	VolumeDeleted       VolumeState = "deleted"
	VolumeError         VolumeState = "error"
)

// Volume is a named volume (api.json VolumeDto).
type Volume struct {
	ID             string      `json:"id"`
	Name           string      `json:"name"`
	OrganizationID string      `json:"organizationId"`
	State          VolumeState `json:"state"`
	ErrorReason    string      `json:"errorReason,omitempty"`
	CreatedAt      string      `json:"createdAt"`
	UpdatedAt      string      `json:"updatedAt"`
	LastUsedAt     string      `json:"lastUsedAt,omitempty"`
}

// SnapshotState is a snapshot's state (api.json SnapshotState).
type SnapshotState string

// Snapshot states.
const (
	SnapshotBuilding     SnapshotState = "building"
	SnapshotPending      SnapshotState = "pending"
	SnapshotPulling      SnapshotState = "pulling"
	SnapshotActive       SnapshotState = "active"
	SnapshotInactive     SnapshotState = "inactive"
	SnapshotError        SnapshotState = "error"
	SnapshotBuildFailed  SnapshotState = "build_failed"
	SnapshotRemoving     SnapshotState = "removing"
	SnapshotSnapshotting SnapshotState = "snapshotting"
)

// Snapshot is a snapshot (api.json SnapshotDto, the fields used).
type Snapshot struct {
	ID             string        `json:"id"`
	OrganizationID string        `json:"organizationId,omitempty"`
	Name           string        `json:"name"`
	ImageName      string        `json:"imageName,omitempty"`
	State          SnapshotState `json:"state"`
	Size           float64       `json:"size,omitempty"`
	Entrypoint     []string      `json:"entrypoint,omitempty"`
	CPU            float64       `json:"cpu"`
	GPU            float64       `json:"gpu"`
	Mem            float64       `json:"mem"`
	Disk           float64       `json:"disk"`
	ErrorReason    string        `json:"errorReason,omitempty"`
	BuildInfo      *BuildInfo    `json:"buildInfo,omitempty"`
	CreatedAt      string        `json:"createdAt,omitempty"`
	UpdatedAt      string        `json:"updatedAt,omitempty"`
}

// CreateSnapshot is the body of a snapshot create: an image name or a
// Dockerfile (BuildInfo).
type CreateSnapshot struct {
	Name       string           `json:"name"`
	ImageName  string           `json:"imageName,omitempty"`
	BuildInfo  *CreateBuildInfo `json:"buildInfo,omitempty"`
	Entrypoint []string         `json:"entrypoint,omitempty"`
	CPU        int              `json:"cpu,omitempty"`
	Memory     int              `json:"memory,omitempty"`
	Disk       int              `json:"disk,omitempty"`
}

// SnapshotPage is one page of snapshots.
type SnapshotPage struct {
	Items      []Snapshot `json:"items"`
	Total      int        `json:"total"`
	Page       int        `json:"page"`
	TotalPages int        `json:"totalPages"`
}

// urlAnswer is api.json Url (and ToolboxProxyUrl).
type urlAnswer struct {
	URL string `json:"url"`
}
