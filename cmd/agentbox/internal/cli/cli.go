// Package cli implements the agentbox command line over an [Engine].
//
// The commands know nothing of a particular engine: cmd/agentbox wires them
// to the local engine, and tests wire them to a fake. [Run] executes one
// command line and returns the process exit code, so that nothing below
// main calls os.Exit.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// DefaultID is the sandbox id used when a command is given no --id.
const DefaultID = "default"

// StateDirEnv is the environment variable that overrides the default state
// dir; the --state-dir flag overrides it in turn.
const StateDirEnv = "AGENTBOX_STATE_DIR"

// Exit codes of the agentbox command beyond those of the commands it runs.
const (
	// ExitError reports that agentbox itself failed (unknown id, engine error).
	ExitError = 1
	// ExitUsage reports a bad command line: unknown command or flag, bad value.
	ExitUsage = 2
	// ExitExecFailed is the code of `agentbox exec` when the command could
	// not be run at all (the sandbox failed to start, the engine failed), as
	// docker and podman do, so that it differs from the command's own codes.
	ExitExecFailed = 125
	// ExitInterrupted is the code after SIGINT or SIGTERM cancelled the work.
	ExitInterrupted = 130
)

// Engine is the sandbox engine the commands drive. Every id is the logical
// id of a sandbox inside stateDir.
type Engine interface {
	// DefaultStateDir is the state dir used without --state-dir and
	// AGENTBOX_STATE_DIR.
	DefaultStateDir() string
	// Open returns a handle on the sandbox opts.ID without starting it; its
	// first command (or Start) creates, restarts or connects to it.
	Open(ctx context.Context, opts OpenOptions) (Box, error)
	// List describes every sandbox of stateDir.
	List(ctx context.Context, stateDir string) ([]sandbox.Info, error)
	// Lookup describes one sandbox; the error matches sandbox.ErrNotFound
	// when there is none with that id.
	Lookup(ctx context.Context, stateDir, id string) (*sandbox.Info, error)
	// Remove destroys a sandbox (processes, files, state).
	Remove(ctx context.Context, stateDir, id string) error
	// StopByID stops a sandbox, keeping its files.
	StopByID(ctx context.Context, stateDir, id string) error
}

// OpenOptions configures [Engine.Open].
type OpenOptions struct {
	StateDir string
	ID       string
	// NetworkBlockAll creates the sandbox without network access. It only
	// matters when the sandbox is created.
	NetworkBlockAll bool
}

// Box is an opened sandbox: the engine-neutral contract, whose
// ProcessManager reaches the background processes of every earlier
// invocation, plus a way to let go of it.
type Box interface {
	sandbox.Sandbox
	// Detach releases what this process holds on the sandbox (connections,
	// pooled sessions, goroutines following output) and leaves the sandbox
	// and its background processes running, for later invocations to reach.
	Detach(ctx context.Context) error
}

// Config is what [Run] needs from its surroundings.
type Config struct {
	Engine Engine
	// Stdin is passed to `agentbox exec` commands unless it is a terminal;
	// nil means no input.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Run executes the agentbox command line args (without the program name)
// and returns the exit code: the command's own for exec, 0 on success,
// [ExitError], [ExitUsage], [ExitExecFailed] or [ExitInterrupted] otherwise.
// Errors are printed on cfg.Stderr.
func Run(ctx context.Context, cfg Config, args []string) int {
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	root, a := newRootCommand(cfg)
	root.SetArgs(args)
	if args == nil {
		root.SetArgs([]string{})
	}
	cmd, err := root.ExecuteContextC(ctx)
	return report(ctx, cmd, cfg.Stderr, explainStateDir(err, a.stateDir))
}

// report prints err and turns it into an exit code.
func report(ctx context.Context, cmd *cobra.Command, stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintln(stderr, "agentbox: interrupted")
		return ExitInterrupted
	}
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, sandbox.ErrInvalidArgument) || errors.Is(err, sandbox.ErrInvalidEnv) {
		fmt.Fprintf(stderr, "agentbox: %v\n", err)
		path := "agentbox"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		return ExitUsage
	}
	code := ExitError
	var ce *codeError
	if errors.As(err, &ce) {
		code = ce.code
	}
	fmt.Fprintf(stderr, "agentbox: %v\n", err)
	return code
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

// codeError is a failure reported with a specific exit code.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// app carries the configuration and global flags to the commands.
type app struct {
	cfg      Config
	stateDir string
	json     bool
}

// NewRootCommand returns the agentbox command tree bound to cfg. Its errors
// are not printed; [Run] prints them and maps them to exit codes.
func NewRootCommand(cfg Config) *cobra.Command {
	root, _ := newRootCommand(cfg)
	return root
}

// newRootCommand returns the command tree and the app its global flags
// fill in.
func newRootCommand(cfg Config) (*cobra.Command, *app) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	a := &app{cfg: cfg}
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run commands in isolated sandboxes",
		Long: `agentbox runs commands in isolated sandboxes on this machine.

A sandbox is created by its first command and keeps running (files,
background processes) until it is stopped, removed, or idle for too long.
Every command works on the sandbox "default" unless given --id.

  agentbox exec -- echo hello          run a command, stream its output
  agentbox spawn -- python3 -m http.server   start a background process
  agentbox ps                          list background processes
  agentbox sandbox ls                  list sandboxes`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          groupRunE,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.resolveStateDir(cmd)
		},
	}
	root.SetIn(orEmpty(cfg.Stdin))
	root.SetOut(cfg.Stdout)
	root.SetErr(cfg.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.stateDir, "state-dir", "", "the `DIR` holding the sandboxes (default $"+StateDirEnv+" or "+cfg.Engine.DefaultStateDir()+")")
	pf.BoolVar(&a.json, "json", false, "print machine-readable JSON instead of text")

	root.AddCommand(a.execCommand(), a.sandboxCommand(), a.spawnCommand(), a.psCommand(), a.killCommand(), a.logsCommand())
	return root, a
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}

func (a *app) resolveStateDir(cmd *cobra.Command) error {
	if cmd.Flags().Changed("state-dir") {
		if a.stateDir == "" {
			return usagef("--state-dir is empty; give a folder path or leave the flag out")
		}
		return nil
	}
	if d := a.cfg.Getenv(StateDirEnv); d != "" {
		a.stateDir = d
		return nil
	}
	a.stateDir = a.cfg.Engine.DefaultStateDir()
	return nil
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// exactArgs requires n positional arguments named by what.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s needs %s, got %d argument(s)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// groupRunE runs a command that only groups subcommands: called bare, it
// shows its help and fails as a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Help()
	return &exitError{code: ExitUsage}
}
