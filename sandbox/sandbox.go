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
	Resources  *Resources        `json:"resources,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// MountInfo describes one filesystem mounted in a sandbox.
type MountInfo struct {
	Path       string `json:"path"`
	Filesystem string `json:"filesystem"`
}

// Resources describes the resources of a sandbox. Zero means unknown or
// unlimited.
type Resources struct {
	CPUCores     float64 `json:"cpuCores,omitempty"`
	CPUPercent   float64 `json:"cpuPercent,omitempty"`
	MemoryMB     int64   `json:"memoryMB,omitempty"`
	MemoryUsedMB int64   `json:"memoryUsedMB,omitempty"`
	DiskMB       int64   `json:"diskMB,omitempty"`
	DiskUsedMB   int64   `json:"diskUsedMB,omitempty"`
}
