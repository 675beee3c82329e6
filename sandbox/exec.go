package sandbox

import (
	"io"
	"time"
)

// Exit codes reported for commands the sandbox ended itself.
const (
	// ExitTimedOut is the exit code of a command killed by its timeout.
	ExitTimedOut = 124
	// ExitKilled is the exit code of a command ended by Kill.
	ExitKilled = 137
)

// DefaultTimeout is the per-command timeout used when neither the call nor
// the sandbox sets one.
const DefaultTimeout = 5 * time.Minute

// Unlimited, as MaxRetainedBytes, keeps all output.
const Unlimited = -1

// ExecOptions configures one command. The zero value is valid.
type ExecOptions struct {
	// Timeout bounds the command: 0 uses the sandbox default, a negative
	// value means no timeout. On expiry the whole process tree is killed and
	// the result has exit code 124, TimedOut and Killed.
	Timeout time.Duration
	// Cwd is the working directory; empty means the sandbox default.
	Cwd string
	// Env is added to the sandbox's environment overlay; values here win.
	// Names must match [A-Za-z_][A-Za-z0-9_]*.
	Env map[string]string
	// Stdout and Stderr, when set, receive output as it is produced, in
	// order. Writes to one writer never happen concurrently.
	Stdout io.Writer
	Stderr io.Writer
	// Stdin, when set, is copied to the command's standard input, which is
	// closed at EOF. Without it the command reads an empty input.
	Stdin io.Reader
	// MaxRetainedBytes caps the bytes of each stream kept in the result; the
	// oldest bytes are dropped first. 0 means the default (all output for
	// ExecuteCommand, 1 MiB for Spawn); Unlimited keeps everything. Other
	// negative values are invalid.
	//
	// The result keeps output whether or not Stdout and Stderr are set: by
	// default ExecuteCommand's result holds all of it even when writers
	// receive it too. A caller that streams large output to its own writer
	// and needs only the end of it in the result sets MaxRetainedBytes
	// (say 64 KiB): its memory then stays bounded however much the command
	// prints. The engines of this module hold whole output in one buffer
	// of up to 8 MiB per stream and the rest in an unlinked temporary file
	// until the command ends, then make each result string once at its
	// exact size: a result costs its own size in memory, not a multiple.
	MaxRetainedBytes int64
}

// CommandResult is the outcome of a command that ran.
type CommandResult struct {
	// Command is the full command line that ran, args quoted.
	Command  string
	ExitCode int
	Stdout   string
	Stderr   string
	Duration time.Duration
	// TimedOut reports that the timeout ended the command (Killed is then
	// also set).
	TimedOut bool
	// Killed reports that the sandbox ended the command (Kill or timeout).
	Killed bool
	// StdoutDroppedBytes and StderrDroppedBytes count bytes dropped by
	// MaxRetainedBytes; non-zero means the retained text is truncated.
	StdoutDroppedBytes int64
	StderrDroppedBytes int64
}

// Success reports whether the command exited with code 0.
func (r *CommandResult) Success() bool { return r != nil && r.ExitCode == 0 }

// StdoutTruncated reports whether stdout lost bytes to MaxRetainedBytes.
func (r *CommandResult) StdoutTruncated() bool { return r.StdoutDroppedBytes > 0 }

// StderrTruncated reports whether stderr lost bytes to MaxRetainedBytes.
func (r *CommandResult) StderrTruncated() bool { return r.StderrDroppedBytes > 0 }
