package sandbox

import (
	"context"
	"io"
)

// ProcessManager starts and tracks the background processes of a sandbox.
// The first call on a sandbox that is not running starts it.
//
// # Processes belong to the sandbox
//
// A background process belongs to the sandbox, not to the handle that
// spawned it. Its id is a decimal number ("1", "2", …) unique in the
// sandbox, and every handle on the same sandbox, in this operating-system
// process or in another one, lists it, reattaches to it with Get or Attach,
// reads its output, waits for it, writes to its stdin and kills it. A new
// process gets the id one above the highest the sandbox knows, so ids
// ascend in spawn order; concurrent spawns, through any handles, get
// distinct ids.
//
// The sandbox knows a process from Spawn until it is forgotten: Kill,
// through any handle, forgets it; so does Get once the process has exited
// (as in Mastra, an exited process is fetched once more, then forgotten).
// Attach and List never forget. A process ends with its sandbox's Stop.
//
// # Releasing a handle
//
// Engines whose handles hold resources in the caller's process (a
// connection, goroutines following output) offer two ways to let go of a
// handle, outside this interface. Close kills the processes spawned through
// the handle that still run and forgets those it spawned. Detach leaves
// every process running and known, for later handles to reattach to; this
// is how a command-line tool starts a process that outlives it. Either way
// the Process values of the handle stop following their processes: Wait
// on one whose process had not exited then fails.
//
// A process's timeout is enforced by the handle that spawned it, while that
// handle is attached: a detached process runs until it ends or is killed.
//
// Engines built on the Daytona toolbox API (package toolbox/process) keep
// process N in the toolbox session "agentbox-bg-N" and its command as that
// session's first command: a process spawned through any client of the
// toolbox API in such a session is listed too.
type ProcessManager interface {
	// Spawn starts command (not quoted; a shell line) in the background.
	// opts.Stdin, if set, is copied to the process; otherwise the process
	// stdin stays open for SendStdin until CloseStdin.
	Spawn(ctx context.Context, command string, opts *ExecOptions) (Process, error)
	// List describes every process the sandbox knows, whichever handle
	// spawned it, in id order.
	List(ctx context.Context) ([]ProcessInfo, error)
	// Get returns the process with the given id: the Process value this
	// handle tracks (the one Spawn or an earlier Get returned), else a new
	// value reattached to the process, which this handle tracks from then
	// on. A process that has exited is returned once more and then
	// forgotten. It returns an error matching ErrNotFound when the sandbox
	// knows no such process.
	Get(ctx context.Context, pid string) (Process, error)
	// Attach returns a new Process value reattached to the process with the
	// given id, whichever handle spawned it, and never forgets the process.
	// The value's Stdout and Stderr hold the output so far when Attach
	// returns; see AttachOptions. It returns an error matching ErrNotFound
	// when the sandbox knows no such process.
	Attach(ctx context.Context, pid string, opts *AttachOptions) (Process, error)
	// Kill ends the process and its whole tree and forgets it. It reports
	// false when the process was unknown or had already exited (an exited
	// process is forgotten too).
	Kill(ctx context.Context, pid string) (bool, error)
}

// AttachOptions configures ProcessManager.Attach. The zero value is valid.
type AttachOptions struct {
	// Stdout and Stderr, when set, receive the process's whole output:
	// what it wrote before Attach (written before Attach returns), then
	// what it writes until it exits. Writes to one writer never happen
	// concurrently.
	Stdout io.Writer
	Stderr io.Writer
	// MaxRetainedBytes caps the bytes of each stream the Process value
	// retains, as ExecOptions.MaxRetainedBytes does for Spawn: 0 means
	// 1 MiB, Unlimited keeps everything, other negative values are
	// invalid.
	MaxRetainedBytes int64
}

// ProcessInfo describes a process of a sandbox.
type ProcessInfo struct {
	PID      string `json:"pid"`
	Command  string `json:"command"`
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Process is a background process, in the manner of os/exec.Cmd after
// Start, seen through one handle on its sandbox.
type Process interface {
	// PID is the process's id in its sandbox (see ProcessManager), not an
	// operating-system pid.
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
	// Kill ends the process and every process it started, and the sandbox
	// forgets it (the handle tracking this value can still Get it once).
	// It reports false if the process had already exited.
	Kill(ctx context.Context) (bool, error)
	// Wait waits for the process to exit and returns its result. It may be
	// called many times and from many goroutines. Cancelling ctx stops the
	// waiting only; it does not kill the process. It fails once the handle
	// that made this value was closed or detached before the process
	// exited.
	Wait(ctx context.Context) (*CommandResult, error)
	// ExitCode returns the exit code and true once the process has exited.
	ExitCode() (int, bool)
}
