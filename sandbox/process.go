package sandbox

import (
	"context"
)

// ProcessManager starts and tracks background processes in a sandbox. The
// first call on a sandbox that is not running starts it.
type ProcessManager interface {
	// Spawn starts command (not quoted; a shell line) in the background.
	// opts.Stdin, if set, is copied to the process; otherwise the process
	// stdin stays open for SendStdin until CloseStdin.
	Spawn(ctx context.Context, command string, opts *ExecOptions) (Process, error)
	// List describes every tracked process.
	List(ctx context.Context) ([]ProcessInfo, error)
	// Get returns the tracked process with the given id. An exited process
	// can be fetched once more after it exited; then it is forgotten.
	// It returns an error matching ErrNotFound when there is none.
	Get(ctx context.Context, pid string) (Process, error)
	// Kill ends the process and its whole tree. It reports false when the
	// process was unknown or had already exited.
	Kill(ctx context.Context, pid string) (bool, error)
}

// ProcessInfo describes a tracked process.
type ProcessInfo struct {
	PID      string `json:"pid"`
	Command  string `json:"command"`
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Process is a background process, in the manner of os/exec.Cmd after Start.
type Process interface {
	// PID is the process's id in its sandbox's process manager.
	PID() string
	// Command is the command line passed to Spawn.
	Command() string
	// Stdout and Stderr return the output retained so far.
	Stdout() string
	Stderr() string
	// SendStdin writes data to the process's standard input. It fails with
	// an error matching ErrExited once the process has exited.
	SendStdin(ctx context.Context, data []byte) error
	// CloseStdin closes the process's standard input so that readers see
	// EOF.
	CloseStdin(ctx context.Context) error
	// Kill ends the process and every process it started. It reports false
	// if the process had already exited.
	Kill(ctx context.Context) (bool, error)
	// Wait waits for the process to exit and returns its result. It may be
	// called many times and from many goroutines. Cancelling ctx stops the
	// waiting only; it does not kill the process.
	Wait(ctx context.Context) (*CommandResult, error)
	// ExitCode returns the exit code and true once the process has exited.
	ExitCode() (int, bool)
}
