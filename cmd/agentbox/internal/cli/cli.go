// Package cli implements the agentbox command line over an [Engine].
//
// The commands know nothing of a particular engine: cmd/agentbox wires them
// to the local engine, and tests wire them to a fake. [Run] executes one
// command line and returns the process exit code, so that nothing below
// main calls os.Exit.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// DefaultID is the sandbox id used when a command is given no --id.
const DefaultID = "default"

// StateDirEnv is the environment variable that overrides the default state
// dir; the --state-dir flag overrides it in turn.
const StateDirEnv = "AGENTBOX_STATE_DIR"

// EngineEnv is the environment variable that selects the engine by name
// (see Config.Engines); the --engine flag overrides it in turn.
const EngineEnv = "AGENTBOX_ENGINE"

// DefaultEngineName is the name --engine gives Config.Engine.
const DefaultEngineName = "local"

// Engine is the sandbox engine the commands drive. Every id is the logical
// id of a sandbox inside stateDir.
type Engine interface {
	// DefaultStateDir is the state dir used without --state-dir and
	// AGENTBOX_STATE_DIR, or an error saying why there is none.
	DefaultStateDir() (string, error)
	// DefaultStateDirHelp says in words how DefaultStateDir chooses, for
	// the help of --state-dir.
	DefaultStateDirHelp() string
	// CheckStateDir fails when stateDir is not safe to use (another user
	// could change it); a folder that does not exist yet passes.
	CheckStateDir(stateDir string) error
	// Open returns a handle on the sandbox opts.ID without starting it; its
	// first command (or Start) creates, restarts or connects to it.
	Open(ctx context.Context, opts OpenOptions) (Box, error)
	// List describes every sandbox of stateDir.
	List(ctx context.Context, stateDir string) ([]sandbox.Info, error)
	// Find returns the handle of the existing sandbox id of stateDir,
	// without starting it. An error matching sandbox.ErrNotFound says
	// that there is none with that id: from Find (local), or from the
	// handle's methods (daytona, whose every method asks the control
	// plane; a local handle's too when the sandbox goes meanwhile).
	Find(ctx context.Context, stateDir, id string) (Handle, error)
}

// Handle is an existing sandbox found by id ([Engine.Find]): the
// operations the CLI does on one sandbox. *local.Sandbox implements it.
type Handle interface {
	// Info describes the sandbox.
	Info(ctx context.Context) (*sandbox.Info, error)
	// Stop stops the sandbox, keeping its files.
	Stop(ctx context.Context) error
	// Destroy removes the sandbox (processes, files, state).
	Destroy(ctx context.Context) error
	// UpdateNetworkSettings changes the network policy of the sandbox,
	// live when it runs, and records it with the sandbox.
	UpdateNetworkSettings(ctx context.Context, p sandbox.NetworkPolicy) error
	// PublishPort forwards hostPort of the host's loopback (0: any free
	// one) to sandboxPort of the sandbox.
	PublishPort(ctx context.Context, hostPort, sandboxPort int) (sandbox.PublishedPort, error)
	// UnpublishPort stops forwarding hostPort.
	UnpublishPort(ctx context.Context, hostPort int) error
}

// OpenOptions configures [Engine.Open].
type OpenOptions struct {
	StateDir string
	ID       string
	// Network is a new sandbox's network policy; the zero value means
	// "whatever the sandbox has" (the default for a new one). exec
	// switches an existing sandbox to the blocked mode first
	// (Handle.UpdateNetworkSettings).
	Network sandbox.NetworkPolicy
	// Resources are a new sandbox's limits; zero fields are the engine's
	// defaults.
	Resources sandbox.Resources
	// Image and Snapshot make a new sandbox's root of an image or a
	// snapshot (see local.Config); "" means the default root.
	Image, Snapshot string
	// ReadOnlyRoot creates a local sandbox with the host's system
	// folders read-only and no capabilities (local.Config.ReadOnlyRoot).
	ReadOnlyRoot bool
	// AllowFUSE lets a new local sandbox's commands mount FUSE file
	// systems (local.Confinement.AllowFUSE).
	AllowFUSE bool
	// Secrets are a new sandbox's secrets: environment variable → the
	// name of a secret of the engine's (SecretEngine); nil for none.
	Secrets map[string]string
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
	// Engine is the default engine, named DefaultEngineName.
	Engine Engine
	// Engines are the other engines, by the name --engine (or
	// AGENTBOX_ENGINE) selects them with.
	Engines map[string]Engine
	// Stdin is read by `agentbox exec -i` only; nil means no input.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// ImageBuilder returns the builder of `agentbox image build`; nil:
	// image build fails saying it is not wired.
	ImageBuilder ImageBuilderFunc
	// NewServer returns the server of `agentbox serve`; nil: serve fails
	// saying the build has none.
	NewServer func(ServerOptions) (Server, error)
	// ServerKeys manages the API keys of serve's records; nil: serve
	// keys fails saying the build has no server.
	ServerKeys ServerKeys
}

// Run executes the agentbox command line args (without the program name)
// and returns the exit code: the command's own for exec (and logs -f), 0
// on success, or one of the Exit… codes. Errors are printed on
// cfg.Stderr; under --json as JSON objects, which exec and logs -f print
// on cfg.Stdout instead, as the last event of their stream. Cancelling ctx
// stops the work; cancel it with an [*Interrupt] cause to report a signal.
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
	if err == nil {
		return 0
	}
	f := classify(ctx, cmd, explainStateDir(err, a.stateDir))
	asJSON := a.json || f.kind == KindUsage && jsonRequested(args)
	w := cfg.Stderr
	if asJSON && streams(cmd) {
		w = cfg.Stdout
	}
	report(w, cmd, f, asJSON)
	return f.code
}

// streams reports whether cmd prints a stream of JSON events under --json:
// exec, and logs -f.
func streams(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	if cmd.Name() == "exec" {
		return true
	}
	f := cmd.Flags().Lookup("follow")
	return cmd.Name() == "logs" && f != nil && f.Value.String() == "true"
}

// jsonRequested reports whether args ask for --json before any "--": for
// a command line that failed to parse, whose flags were not all read.
func jsonRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// app carries the configuration and global flags to the commands.
type app struct {
	cfg        Config
	engine     Engine // the engine --engine selects (selectEngine)
	engineName string
	stateDir   string
	json       bool
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
  agentbox sandbox ls                  list sandboxes
  agentbox image pull alpine:3.20      fetch an image for sandboxes`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          groupRunE,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Name() == "help" {
				return nil // the only command that needs no state dir
			}
			if err := a.selectEngine(cmd); err != nil {
				return err
			}
			if err := a.resolveStateDir(cmd); err != nil {
				return err
			}
			return a.checkStateDir()
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
	pf.StringVar(&a.stateDir, "state-dir", "", "the `DIR` holding the sandboxes (default: $"+StateDirEnv+", else "+cfg.Engine.DefaultStateDirHelp()+"); it must be private to you")
	pf.StringVar(&a.engineName, "engine", "", "the `ENGINE` that runs the sandboxes: "+strings.Join(engineNames(cfg), ", ")+" (default: $"+EngineEnv+", else "+DefaultEngineName+")")
	pf.BoolVar(&a.json, "json", false, "print machine-readable JSON instead of text, errors included (see 'agentbox help json')")

	root.AddCommand(a.execCommand(), a.sandboxCommand(), a.spawnCommand(), a.psCommand(), a.killCommand(), a.logsCommand(), a.portsCommand(), a.shellCommand(), a.gitCommand(), a.imageCommand(), a.serveCommand(), a.snapshotCommand(), a.mcpCommand(), a.mountCommand(), a.unmountCommand(), a.secretCommand(),
		// A help topic: 'agentbox help json'.
		&cobra.Command{Use: "json", Short: "What --json prints: event streams, documents and error codes", Long: jsonHelp})
	return root, a
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}

// engineNames lists the names of the engines of cfg, the default first.
func engineNames(cfg Config) []string {
	names := []string{DefaultEngineName}
	for n := range cfg.Engines {
		if n != DefaultEngineName {
			names = append(names, n)
		}
	}
	slices.Sort(names[1:])
	return names
}

// selectEngine sets a.engine from --engine, else AGENTBOX_ENGINE, else
// the default engine.
func (a *app) selectEngine(cmd *cobra.Command) error {
	name := a.engineName
	if !cmd.Flags().Changed("engine") {
		name = a.cfg.Getenv(EngineEnv)
	}
	if name == "" || name == DefaultEngineName {
		a.engine = a.cfg.Engine
		return nil
	}
	if e, ok := a.cfg.Engines[name]; ok {
		a.engine = e
		return nil
	}
	return usagef("unknown engine %q: this agentbox has %s", name, strings.Join(engineNames(a.cfg), ", "))
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
	d, err := a.engine.DefaultStateDir()
	if err != nil {
		return withKind(KindStateDir, 0, fmt.Errorf("%w, or pass --state-dir DIR", err))
	}
	a.stateDir = d
	return nil
}

// checkStateDir fails unless the state dir is safe to use.
func (a *app) checkStateDir() error {
	if err := a.engine.CheckStateDir(a.stateDir); err != nil {
		return withKind(KindStateDir, 0, fmt.Errorf("%w (pass --state-dir DIR or set %s to use another)", err, StateDirEnv))
	}
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
