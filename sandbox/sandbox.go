package sandbox

import (
	"context"
	"time"
)

// Sandbox is an isolated place to run commands. Implementations are safe for
// concurrent use.
type Sandbox interface {
	// ID is the logical id of this sandbox.
	ID() string
	// Name is the engine's human name, e.g. "LocalSandbox" or "DaytonaSandbox".
	Name() string
	// Provider is the engine's short name, e.g. "local" or "daytona".
	Provider() string
	// Status reports the current lifecycle status.
	Status() Status

	// Start acquires the sandbox: it finds the sandbox with the same id and
	// connects to it, restarting it first if it was stopped
	// (OutcomeConnected), or creates a new one (OutcomeCreated).
	// Concurrent calls share one attempt.
	Start(ctx context.Context) (Outcome, error)
	// Stop ends every process and keeps the files.
	Stop(ctx context.Context) error
	// Destroy removes the sandbox and everything it owns. A destroyed
	// sandbox cannot be started again.
	Destroy(ctx context.Context) error

	// ExecuteCommand runs command, followed by args each quoted with
	// [ShellQuote], and waits for it. The command itself is not quoted, so it
	// may contain pipes and redirections. A command that runs and fails is
	// not an error: it returns a result whose ExitCode is non-zero.
	//
	// The command belongs to the call, as with os/exec or ssh: cancelling
	// ctx kills it, and so does the end of the calling process, however it
	// ends (even SIGKILL): the engines of this module kill a command whose
	// client has been gone for a few seconds (toolbox.TetherGrace), so none
	// runs on unseen. Use Processes().Spawn for work that must outlive its
	// caller. A command cut short because the sandbox stopped or was
	// destroyed fails with an error matching ErrNotReady (and ErrDestroyed).
	ExecuteCommand(ctx context.Context, command string, args []string, opts *ExecOptions) (*CommandResult, error)
	// Processes returns the manager of background processes.
	Processes() ProcessManager

	// Info describes the sandbox.
	Info(ctx context.Context) (*Info, error)
	// Instructions is text for an agent's system prompt describing this
	// sandbox truthfully.
	Instructions() string
}

// Outcome tells how Start acquired a sandbox.
type Outcome string

// Outcomes of Start, as in Mastra: an existing sandbox, running or stopped,
// is connected; only a new one is created.
const (
	OutcomeCreated   Outcome = "created"
	OutcomeConnected Outcome = "connected"
)

// Status is the lifecycle status of a sandbox.
type Status string

// Lifecycle statuses, as in Mastra's ProviderStatus.
const (
	StatusPending    Status = "pending"
	StatusStarting   Status = "starting"
	StatusRunning    Status = "running"
	StatusStopping   Status = "stopping"
	StatusStopped    Status = "stopped"
	StatusDestroying Status = "destroying"
	StatusDestroyed  Status = "destroyed"
	StatusError      Status = "error"
)

// Info describes a sandbox.
type Info struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Provider   string            `json:"provider"`
	Status     Status            `json:"status"`
	CreatedAt  time.Time         `json:"createdAt"`
	LastUsedAt time.Time         `json:"lastUsedAt,omitzero"`
	TimeoutAt  time.Time         `json:"timeoutAt,omitzero"`
	Mounts     []MountInfo       `json:"mounts,omitempty"`
	Usage      *Usage            `json:"resources,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// Identity is who commands run as; nil when the engine does not know.
	Identity *Identity `json:"identity,omitempty"`
	// Network is the sandbox's network access; nil when the engine does
	// not know.
	Network *NetworkInfo `json:"network,omitempty"`
	// Limits are the resource limits the sandbox enforces; nil when the
	// engine does not know.
	Limits *Limits `json:"limits,omitempty"`
	// Secrets are the sandbox's secrets, without their values.
	Secrets []SecretInfo `json:"secrets,omitempty"`
}

// Identity describes who commands run as inside a sandbox.
type Identity struct {
	// User is the user name commands see in $USER and $LOGNAME.
	User string `json:"user"`
	// UID and GID are the ids commands run with, as seen inside.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Home is $HOME.
	Home string `json:"home"`
	// HostUID is the host uid that UID 0 inside maps to, and HostUIDCount
	// how many consecutive host uids the sandbox's ids map to (1: only
	// UID). Zero when the sandbox is not on this host or not known.
	HostUID      int `json:"hostUid,omitempty"`
	HostUIDCount int `json:"hostUidCount,omitempty"`
	// Capabilities lists the Linux capabilities commands hold, "none" when
	// they hold none; empty when not known.
	Capabilities string `json:"capabilities,omitempty"`
}

// NetworkMode is the network access of a sandbox.
type NetworkMode string

// Network modes.
const (
	// NetworkHost: the sandbox shares the host's network namespace: it
	// reaches everything the host reaches, loopback services included.
	NetworkHost NetworkMode = "host"
	// NetworkPublic: the sandbox has a network namespace of its own and
	// reaches the public internet only: not the host, its loopback
	// services or its networks, not private, shared or link-local
	// addresses (cloud metadata), not other sandboxes.
	NetworkPublic NetworkMode = "public"
	// NetworkBlocked: the sandbox has a network namespace of its own with
	// only a loopback interface.
	NetworkBlocked NetworkMode = "blocked"
	// NetworkAllowList: the sandbox has a network namespace of its own and
	// reaches only the address ranges of its allow list (and, when it has
	// one too, the names of its domain allow list through an egress
	// proxy).
	NetworkAllowList NetworkMode = "allowList"
	// NetworkDomainAllowList: the sandbox has a network namespace of its
	// own with only a loopback interface, and reaches the names of its
	// allow list through an egress proxy.
	NetworkDomainAllowList NetworkMode = "domainAllowList"
)

// NetworkInfo describes the network access of a sandbox.
type NetworkInfo struct {
	Mode NetworkMode `json:"mode"`
	// AllowList lists the address ranges (CIDRs) the sandbox may reach in
	// mode NetworkAllowList.
	AllowList []string `json:"allowList,omitempty"`
	// DomainAllowList lists the names (and "*." wildcards) the sandbox may
	// reach through its egress proxy (modes NetworkDomainAllowList and
	// NetworkAllowList).
	DomainAllowList []string `json:"domainAllowList,omitempty"`
	// Ports are the sandbox ports published on the host.
	Ports []PublishedPort `json:"ports,omitempty"`
	// RefusedConnections counts the connections and requests the egress
	// proxy refused by policy; RefusedPackets the packets the sandbox's
	// firewall refused (answered with a TCP reset or an ICMP
	// administratively-prohibited error) since the sandbox last started.
	RefusedConnections uint64 `json:"refusedConnections,omitempty"`
	RefusedPackets     uint64 `json:"refusedPackets,omitempty"`
	// PolicyLog holds the last refusals that name their destination,
	// oldest first.
	PolicyLog []NetworkRefusal `json:"policyLog,omitempty"`
	// Note says in words what the fields do not (e.g. a part of the
	// policy that is not in force).
	Note string `json:"note,omitempty"`
}

// PublishedPort forwards a port of the host to a port of the sandbox.
type PublishedPort struct {
	// HostAddress and HostPort are where host processes connect, e.g.
	// 127.0.0.1 and 8080.
	HostAddress string `json:"hostAddress"`
	HostPort    int    `json:"hostPort"`
	// SandboxPort is the TCP port inside the sandbox.
	SandboxPort int `json:"sandboxPort"`
}

// NetworkRefusal is one entry of a sandbox's network policy log.
type NetworkRefusal struct {
	Time time.Time `json:"time"`
	// Protocol is how the sandbox asked ("http", "connect", "socks5",
	// "tls", …).
	Protocol string `json:"protocol"`
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Reason   string `json:"reason"`
}

// Limits are the resource limits a sandbox enforces. A zero field means
// that no limit of that kind is enforced; Note says in words what is and
// is not enforced.
type Limits struct {
	CPUCores  float64 `json:"cpuCores,omitempty"`
	MemoryMB  int64   `json:"memoryMB,omitempty"`
	Processes int64   `json:"processes,omitempty"`
	DiskMB    int64   `json:"diskMB,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// MountInfo describes one filesystem mounted in a sandbox.
type MountInfo struct {
	Path string `json:"path"`
	// Filesystem describes what is mounted, without credentials, e.g.
	// "s3://bucket/prefix".
	Filesystem string `json:"filesystem"`
	// Kind is the filesystem's type: "s3", "gcs", …; empty when unknown.
	Kind     string `json:"kind,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// State is the mount's state; empty when the engine does not track
	// it (the mount is then in place).
	State MountState `json:"state,omitempty"`
	// Error says why the last attempt failed (State MountError or
	// MountUnavailable).
	Error string `json:"error,omitempty"`
}

// Usage describes the resources a sandbox has and uses, as observed
// (see [Resources] for the limits it is created with). Zero means
// unknown or unlimited.
type Usage struct {
	CPUCores     float64 `json:"cpuCores,omitempty"`
	CPUPercent   float64 `json:"cpuPercent,omitempty"`
	MemoryMB     int64   `json:"memoryMB,omitempty"`
	MemoryUsedMB int64   `json:"memoryUsedMB,omitempty"`
	DiskMB       int64   `json:"diskMB,omitempty"`
	DiskUsedMB   int64   `json:"diskUsedMB,omitempty"`
}
