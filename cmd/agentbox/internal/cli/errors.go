package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// Exit codes of the agentbox command beyond those of the commands it runs.
const (
	// ExitError reports that agentbox itself failed (unknown id, engine error).
	ExitError = 1
	// ExitUsage reports a bad command line: unknown command or flag, bad
	// value, or an option the sandbox cannot honour.
	ExitUsage = 2
	// ExitExecFailed is the code of `agentbox exec` when the command could
	// not be run at all (the sandbox failed to start, the engine failed), as
	// docker and podman do, so that it differs from the command's own codes.
	ExitExecFailed = 125
	// ExitSandboxGone is the code of `agentbox exec` and `agentbox logs -f`
	// when the sandbox was stopped or removed while the command ran, which
	// killed it (128 + SIGKILL, the code of a killed command).
	ExitSandboxGone = 137
	// ExitBrokenPipe is the exit code of exec when its output pipe was closed
	// (128 + SIGPIPE, as a shell reports a writer killed by SIGPIPE). The
	// command is killed then, rather than left running unread.
	ExitBrokenPipe = 141
	// ExitInterrupted is the code after SIGINT cancelled the work (128 + 2).
	ExitInterrupted = 130
	// ExitTerminated is the code after SIGTERM cancelled the work (128 + 15).
	ExitTerminated = 143
)

// Error kinds: the stable "code" of an error printed under --json.
const (
	KindUsage          = "usage"           // bad command line (exit 2)
	KindConfigConflict = "config_conflict" // an option the existing sandbox was not created with (exit 2)
	KindNotFound       = "not_found"       // no such sandbox, process or image (exit 1)
	KindInUse          = "in_use"          // an image a sandbox or snapshot still uses (exit 1)
	KindStateDir       = "state_dir"       // the state dir is unusable: not writable, unsafe, none (exit 1; 125 for exec)
	KindStartFailed    = "start_failed"    // the sandbox could not start (exit 1; 125 for exec)
	KindSandboxGone    = "sandbox_gone"    // the sandbox was stopped or removed while the command ran (exit 137)
	KindOutput         = "output"          // writing the command's output failed (exit 125)
	KindInterrupted    = "interrupted"     // SIGINT or SIGTERM (exit 130 or 143)
	KindInternal       = "internal"        // anything else (exit 1; 125 for exec)
)

// Interrupt is the cause with which the caller of [Run] cancels its
// context when a signal asks agentbox to stop: Run then exits with 128 +
// the signal's number (130 for SIGINT, 143 for SIGTERM). A context
// cancelled with another cause exits 130.
type Interrupt struct {
	Signal syscall.Signal
}

func (i *Interrupt) Error() string { return "interrupted by " + i.Signal.String() }

// interruptCode returns the exit code and message of work cancelled by ctx.
func interruptCode(ctx context.Context) (int, string) {
	var in *Interrupt
	if errors.As(context.Cause(ctx), &in) {
		if in.Signal == syscall.SIGTERM {
			return ExitTerminated, "terminated"
		}
		return 128 + int(in.Signal), "interrupted"
	}
	return ExitInterrupted, "interrupted"
}

// usageError is a bad command line; it exits with ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// notFoundError says what was not found and where to look; it matches
// sandbox.ErrNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == sandbox.ErrNotFound }

func notFoundf(format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...)}
}

// exitError ends agentbox with code and no message (the command already
// spoke for itself).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// kindError is an error of a given kind and exit code; code 0 means the
// kind's usual one.
type kindError struct {
	kind string
	code int
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// withKind marks err with kind and code (0: decided by the kind).
func withKind(kind string, code int, err error) error {
	return &kindError{kind: kind, code: code, err: err}
}

// failure is how agentbox reports an error: its exit code, kind and
// message, and whether to point at the command's help.
type failure struct {
	code    int
	kind    string
	message string
	help    bool
	silent  bool // the command already spoke for itself
}

// classify turns the error of command cmd into a failure.
func classify(ctx context.Context, cmd *cobra.Command, err error) failure {
	var ee *exitError
	if errors.As(err, &ee) {
		return failure{code: ee.code, silent: true}
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		code, msg := interruptCode(ctx)
		return failure{code: code, kind: KindInterrupted, message: msg}
	}
	f := failure{kind: KindInternal, code: ExitError, message: cliMessage(err)}
	var ke *kindError
	var ue *usageError
	var sde *stateDirError
	switch {
	case errors.As(err, &sde):
		f.kind = KindStateDir
	case errors.As(err, &ke):
		f.kind = ke.kind
	case errors.As(err, &ue) || errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrInvalidEnv):
		f.kind, f.help = KindUsage, true
	case errors.Is(err, sandbox.ErrNotFound):
		f.kind = KindNotFound
	}
	switch f.kind {
	case KindUsage, KindConfigConflict:
		f.code = ExitUsage
	case KindSandboxGone:
		f.code = ExitSandboxGone
	case KindOutput:
		f.code = ExitExecFailed
	default:
		if cmd != nil && cmd.Name() == "exec" {
			// exec's own failures differ from the command's codes.
			f.code = ExitExecFailed
		}
	}
	if ke != nil && ke.code != 0 {
		f.code = ke.code
	}
	return f
}

// errorEvent is the --json form of an error.
type errorEvent struct {
	Type     string `json:"type"` // "error"
	Code     string `json:"code"` // a Kind… constant
	Message  string `json:"message"`
	ExitCode int    `json:"exitCode"`
}

// report prints the failure f of command cmd on w, as JSON when asJSON.
func report(w io.Writer, cmd *cobra.Command, f failure, asJSON bool) {
	if f.silent {
		return
	}
	if asJSON {
		_ = writeJSONLine(w, errorEvent{Type: "error", Code: f.kind, Message: f.message, ExitCode: f.code})
		return
	}
	fmt.Fprintf(w, "agentbox: %s\n", f.message)
	if f.help {
		path := "agentbox"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", path)
	}
}
