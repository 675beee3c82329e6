package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// streamTail is how much output exec keeps in memory while it streams: the
// result's copy is not printed, so there is no need to hold it all.
const streamTail = 4 << 10

func addIDFlag(fs *pflag.FlagSet, id *string) {
	fs.StringVarP(id, "id", "i", DefaultID, "`SANDBOX` id (see 'agentbox sandbox ls')")
}

func checkID(id string) error {
	if id == "" {
		return usagef("--id is empty; give a sandbox id (see 'agentbox sandbox ls') or leave the flag out for %q", DefaultID)
	}
	return nil
}

func (a *app) execCommand() *cobra.Command {
	var (
		id       string
		timeout  timeoutValue
		envFlags []string
		cwd      string
		blockNet bool
	)
	c := &cobra.Command{
		Use:   "exec [flags] [--] COMMAND [ARG...]",
		Short: "Run a command in a sandbox and wait for it",
		Long: `Run a command in a sandbox, streaming its output, and exit with its exit code.

The sandbox is created (or restarted) if needed and keeps running afterwards.
COMMAND is a shell line, not quoted, so it may hold pipes and redirections;
each ARG is quoted and reaches the command as one argument. Standard input is
passed to the command when it is a pipe or a file, not a terminal or /dev/null.

Exit codes: the command's own; 124 when --timeout ended it; 125 when agentbox
could not run it (the message says why); 2 for a bad command line; 130 when
interrupted.`,
		Example: `  agentbox exec -- echo hello
  agentbox exec --id build --env GOFLAGS=-mod=mod --cwd /tmp -- go version
  agentbox exec -- 'ls -l | wc -l'
  echo data | agentbox exec -- wc -c`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("exec needs a command: agentbox exec [flags] -- COMMAND [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			env, err := parseEnv(envFlags)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancelCause(cmd.Context())
			defer cancel(nil)
			opts := &sandbox.ExecOptions{Timeout: timeout.execTimeout(), Cwd: cwd, Env: env}
			if !a.json {
				opts.Stdout = &guardedWriter{w: cmd.OutOrStdout(), what: "standard output", cancel: cancel}
				opts.Stderr = &guardedWriter{w: cmd.ErrOrStderr(), what: "standard error", cancel: cancel}
				opts.MaxRetainedBytes = streamTail
			}
			if passStdin(a.cfg.Stdin) {
				opts.Stdin = a.cfg.Stdin
			}
			err = a.exec(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), OpenOptions{
				StateDir: a.stateDir, ID: id, NetworkBlockAll: blockNet,
			}, args[0], args[1:], opts)
			var oe *outputError
			if err != nil && errors.As(context.Cause(ctx), &oe) {
				if errors.Is(oe.err, syscall.EPIPE) {
					// The reader went away (agentbox exec -- yes | head): end
					// quietly, as a shell pipeline's writer does.
					return &exitError{code: ExitBrokenPipe}
				}
				return &codeError{code: ExitExecFailed, err: oe}
			}
			return err
		},
	}
	fs := c.Flags()
	fs.SetInterspersed(false) // agentbox exec ls -l: -l belongs to ls
	addIDFlag(fs, &id)
	fs.Var(&timeout, "timeout", "kill the command after this long, e.g. 30s or 5m (0 = never; default: the sandbox's, 5m)")
	fs.StringArrayVarP(&envFlags, "env", "e", nil, "set an environment variable, NAME=VALUE (repeatable)")
	fs.StringVarP(&cwd, "cwd", "w", "", "working directory inside the sandbox (default: the sandbox's working directory, its home unless the sandbox was created with another)")
	fs.BoolVar(&blockNet, "block-network", false, "create the sandbox without network access (only when it is created)")
	return c
}

// ExitBrokenPipe is the exit code of exec when its output pipe was closed
// (128 + SIGPIPE, as a shell reports a writer killed by SIGPIPE). The
// command is killed then, rather than left running unread.
const ExitBrokenPipe = 141

// outputError reports that writing a command's output failed.
type outputError struct {
	what string
	err  error
}

func (e *outputError) Error() string { return "writing the command's " + e.what + ": " + e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// guardedWriter passes output on until a write fails; the failure cancels
// the command, since nobody reads its output any more.
type guardedWriter struct {
	w      io.Writer
	what   string
	cancel context.CancelCauseFunc
	failed bool
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	if g.failed {
		return 0, io.ErrClosedPipe
	}
	n, err := g.w.Write(p)
	if err != nil {
		g.failed = true
		g.cancel(&outputError{what: g.what, err: err})
	}
	return n, err
}

// execResult is the --json form of a command's result.
type execResult struct {
	Sandbox    string  `json:"sandbox"`
	Command    string  `json:"command"`
	ExitCode   int     `json:"exitCode"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
	DurationMs float64 `json:"durationMs"`
	TimedOut   bool    `json:"timedOut"`
	Killed     bool    `json:"killed"`
}

func (a *app) exec(ctx context.Context, stdout, stderr io.Writer, oo OpenOptions, command string, args []string, opts *sandbox.ExecOptions) error {
	box, err := a.cfg.Engine.Open(ctx, oo)
	if err != nil {
		return execFailed(ctx, fmt.Errorf("open sandbox %q: %w", oo.ID, err))
	}
	defer box.Detach(context.WithoutCancel(ctx))
	res, err := box.ExecuteCommand(ctx, command, args, opts)
	if err != nil {
		var nr *sandbox.NotReadyError
		if errors.As(err, &nr) && nr.Err != nil {
			return execFailed(ctx, fmt.Errorf("cannot start sandbox %q: %w", oo.ID, nr.Err))
		}
		return execFailed(ctx, fmt.Errorf("sandbox %q: %w", oo.ID, err))
	}
	if a.json {
		if err := writeJSON(stdout, execResult{
			Sandbox: oo.ID, Command: res.Command, ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
			DurationMs: float64(res.Duration.Microseconds()) / 1000, TimedOut: res.TimedOut, Killed: res.Killed,
		}); err != nil {
			return err
		}
	} else if res.TimedOut {
		fmt.Fprintf(stderr, "agentbox: command timed out after %s and was killed (exit %d)\n", res.Duration.Round(1e6), res.ExitCode)
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}

// execFailed marks an error of exec itself with ExitExecFailed, leaving
// interruptions and usage errors to their own codes.
func execFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	if errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrInvalidEnv) {
		return err
	}
	return &codeError{code: ExitExecFailed, err: err}
}
