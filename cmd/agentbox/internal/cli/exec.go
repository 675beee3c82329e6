package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// streamTail is how much output exec keeps in memory while it streams: the
// result's copy is not printed, so there is no need to hold it all.
const streamTail = 4 << 10

// maxScript bounds the script `exec -i` reads from standard input.
const maxScript = 1 << 20

func addIDFlag(fs *pflag.FlagSet, id *string) {
	fs.StringVar(id, "id", DefaultID, "`SANDBOX` id (see 'agentbox sandbox ls')")
}

func checkID(id string) error {
	if id == "" {
		return usagef("--id is empty; give a sandbox id (see 'agentbox sandbox ls') or leave the flag out for %q", DefaultID)
	}
	return nil
}

// checkLine fails unless line, the command line of cmd, holds a command.
func checkLine(cmd, line string) error {
	if strings.TrimSpace(line) == "" {
		return usagef("the command is empty: give a shell command line, as in agentbox %s -- echo hello", cmd)
	}
	return nil
}

// commandFlags are the flags exec and spawn share.
type commandFlags struct {
	id       string
	timeout  timeoutValue
	envFlags []string
	cwd      string
}

func (f *commandFlags) add(fs *pflag.FlagSet, timeoutHelp string) {
	fs.SetInterspersed(false) // agentbox exec ls -l: -l belongs to ls
	addIDFlag(fs, &f.id)
	fs.Var(&f.timeout, "timeout", timeoutHelp)
	fs.StringArrayVarP(&f.envFlags, "env", "e", nil, "set an environment variable, NAME=VALUE (repeatable)")
	fs.StringVarP(&f.cwd, "cwd", "w", "", "working directory inside the sandbox (default: the sandbox's working directory, its home unless the sandbox was created with another)")
}

// options checks the flags and returns the command's options.
func (f *commandFlags) options() (*sandbox.ExecOptions, error) {
	if err := checkID(f.id); err != nil {
		return nil, err
	}
	env, err := parseEnv(f.envFlags)
	if err != nil {
		return nil, err
	}
	return &sandbox.ExecOptions{Timeout: f.timeout.execTimeout(), Cwd: f.cwd, Env: env}, nil
}

// execLong is the help of exec.
const execLong = `Run a command in a sandbox, streaming its output, and exit with its exit code.

The sandbox is created (or restarted) if needed and keeps running afterwards.
COMMAND is a shell line, not quoted, so it may hold pipes and redirections;
each ARG is quoted and reaches the command as one argument.

Standard input is passed only when asked: without -i the command reads an
empty input, so that agentbox in a loop never swallows the loop's input.
With -i and a COMMAND, the command reads agentbox's standard input (exact
bytes, then end of file). With -i and no COMMAND, agentbox reads a shell
script from its standard input (1 MiB at most) and runs it as the command,
which then reads an empty input.

With --json, exec prints a stream of JSON lines: "start", then "stdout" and
"stderr" chunks (exact bytes, as UTF-8 text or base64), then "exit" or
"error"; errors have a stable "code". See 'agentbox help json'.

A new sandbox gets the secrets --secret names (see 'agentbox secret'): its
environment holds a placeholder for each, which the engine's egress proxy
replaces with the value only in requests to the secret's hosts; an
existing sandbox keeps the secrets it was made with.

A new sandbox gets the limits --cpu, --memory, --disk and --pids give
(memory and disk: a number of MiB, or 512MiB, 2GiB); an existing one keeps
its own (the local engine refuses values other than its own).

Exit codes: the command's own; 124 when --timeout ended it; 2 for a bad
command line, or an option the sandbox cannot honour (--block-network on
a sandbox whose network cannot change: one made with the host's network);
125 when agentbox could not run it (the
message says why); 137 when the sandbox was stopped or removed while the
command ran; 141 when agentbox's output was closed; 130 after SIGINT and
143 after SIGTERM (the command is killed in every case).`

func (a *app) execCommand() *cobra.Command {
	var (
		f            commandFlags
		res          resourceFlags
		blockNet     bool
		readOnlyRoot bool
		allowFUSE    bool
		img          string
		snap         string
		stdin        bool
		secrets      secretFlags
	)
	c := &cobra.Command{
		Use:   "exec [flags] [--] COMMAND [ARG...]",
		Short: "Run a command in a sandbox and wait for it",
		Long:  execLong,
		Example: `  agentbox exec -- echo hello
  agentbox exec --id build --env GOFLAGS=-mod=mod --cwd /tmp -- go version
  agentbox exec -- 'ls -l | wc -l'
  echo data | agentbox exec -i -- wc -c
  agentbox exec -i < setup.sh
  agentbox exec --json -- sh -c 'echo out; echo err >&2'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !stdin {
				return usagef("exec needs a command: agentbox exec [flags] -- COMMAND [ARG...], or a script on standard input with -i")
			}
			if len(args) > 0 {
				return checkLine("exec", sandbox.CommandLine(args[0], args[1:]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			if blockNet && len(secrets.refs) > 0 {
				return usagef("--secret and --block-network exclude each other: a sandbox without network reaches no host to send a secret to")
			}
			var command string
			switch {
			case len(args) > 0:
				command, args = args[0], args[1:]
				if stdin {
					opts.Stdin = orEmpty(a.cfg.Stdin)
				}
			default:
				if command, err = readScript(a.cfg.Stdin); err != nil {
					return err
				}
			}
			out := guardOutput(cmd)
			defer out.cancel(nil)
			var events *eventStream
			if a.json {
				events = newEventStream(out.stdout)
			} else {
				opts.Stdout, opts.Stderr = out.stdout, out.stderr
			}
			opts.MaxRetainedBytes = streamTail
			return out.explain(a.exec(out.ctx, cmd.ErrOrStderr(), events, OpenOptions{
				StateDir: a.stateDir, ID: f.id, Network: sandbox.BlockedIf(blockNet), Resources: res.Resources, Image: img, Snapshot: snap,
				ReadOnlyRoot: readOnlyRoot, AllowFUSE: allowFUSE, Secrets: secrets.refs,
			}, command, args, opts))
		},
	}
	fs := c.Flags()
	f.add(fs, "kill the command after this long, e.g. 30s or 5m (0 = never; default: the sandbox's, 5m)")
	fs.BoolVarP(&stdin, "stdin", "i", false, "pass standard input to COMMAND; without COMMAND, run the script read from standard input")
	fs.StringVar(&img, "image", "", "create the sandbox with its root made of this `IMAGE` (a registry reference, oci:DIR, a docker-save tarball or a rootfs folder; needs root); ignored for an existing sandbox unless it differs")
	fs.StringVar(&snap, "snapshot", "", "create the sandbox from this `SNAPSHOT` (see 'agentbox snapshot ls'; needs root)")
	fs.BoolVar(&readOnlyRoot, "read-only-root", false, "create the sandbox with the host's system folders read-only and no capabilities, instead of a writable root (local engine)")
	fs.BoolVar(&allowFUSE, "allow-fuse", false, "create the sandbox with /dev/fuse, its commands allowed to mount FUSE file systems (s3fs, gcsfuse …; local engine, as root)")
	res.add(fs)
	secrets.add(fs)
	fs.BoolVar(&blockNet, "block-network", false, "run without network access: create the sandbox so, or block the network of an existing one first (live; 'agentbox sandbox network ID --default' undoes it)")
	return c
}

// readScript reads the script of exec -i from r.
func readScript(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(orEmpty(r), maxScript+1))
	if err != nil {
		return "", fmt.Errorf("read the script from standard input: %w", err)
	}
	if len(b) > maxScript {
		return "", usagef("the script on standard input is larger than %d KiB: copy it into the sandbox and run it by path", maxScript>>10)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", usagef("exec -i without a command runs the script on standard input, which is empty: pipe a script in, or give a command after --")
	}
	return string(b), nil
}

// outputError reports that writing a command's output failed.
type outputError struct {
	what string
	err  error
}

func (e *outputError) Error() string { return "writing the command's " + e.what + ": " + e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// guardedOutput is the output of a command that agentbox prints: writing
// it fails once nobody reads it, which cancels ctx, so that the command
// is killed rather than left running unread.
type guardedOutput struct {
	ctx            context.Context
	cancel         context.CancelCauseFunc
	stdout, stderr io.Writer
}

// guardOutput guards the standard output and error of cmd.
func guardOutput(cmd *cobra.Command) *guardedOutput {
	ctx, cancel := context.WithCancelCause(cmd.Context())
	return &guardedOutput{
		ctx: ctx, cancel: cancel,
		stdout: &guardedWriter{w: cmd.OutOrStdout(), what: "standard output", cancel: cancel},
		stderr: &guardedWriter{w: cmd.ErrOrStderr(), what: "standard error", cancel: cancel},
	}
}

// explain returns err, the error of the work, or the output's failure that
// caused it.
func (g *guardedOutput) explain(err error) error {
	var oe *outputError
	if err == nil || !errors.As(context.Cause(g.ctx), &oe) {
		return err
	}
	if errors.Is(oe.err, syscall.EPIPE) {
		// The reader went away (agentbox exec -- yes | head): end quietly,
		// as a shell pipeline's writer does.
		return &exitError{code: ExitBrokenPipe}
	}
	return withKind(KindOutput, 0, oe)
}

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

// exec runs command in the sandbox oo names, printing its output through
// opts' writers, or as JSON events when events is not nil.
func (a *app) exec(ctx context.Context, stderr io.Writer, events *eventStream, oo OpenOptions, command string, args []string, opts *sandbox.ExecOptions) error {
	if oo.Network.Mode == sandbox.NetworkBlocked {
		if err := a.blockNetwork(ctx, stderr, oo.ID); err != nil {
			return err
		}
	}
	box, err := a.engine.Open(ctx, oo)
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", oo.ID, err)
	}
	defer box.Detach(context.WithoutCancel(ctx))
	if _, err := box.Start(ctx); err != nil {
		return startFailed(ctx, oo.ID, err)
	}
	flush := func() {}
	if events != nil {
		if err := events.start(startEvent{Sandbox: oo.ID, Command: sandbox.CommandLine(command, args)}); err != nil {
			return err
		}
		stdout, stderr := events.output("stdout"), events.output("stderr")
		opts.Stdout, opts.Stderr = stdout, stderr
		flush = func() { stdout.Close(); stderr.Close() }
	}
	res, err := box.ExecuteCommand(ctx, command, args, opts)
	flush()
	if ctx.Err() == nil && (err != nil || res.ExitCode > 128) {
		if gone := a.sandboxGone(ctx, oo.ID); gone != nil {
			return gone
		}
	}
	if err != nil {
		return fmt.Errorf("sandbox %q: %w", oo.ID, err)
	}
	return a.finish(events, stderr, res)
}

// finish reports the result of a command that ran to its end, and turns
// its exit code into agentbox's.
func (a *app) finish(events *eventStream, stderr io.Writer, res *sandbox.CommandResult) error {
	if events != nil {
		if err := events.exit(res); err != nil {
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

// startFailed explains why the sandbox id could not start.
func startFailed(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	if errors.Is(err, sandbox.ErrInvalidArgument) {
		return fmt.Errorf("sandbox %q: %w", id, err)
	}
	var nr *sandbox.NotReadyError
	if errors.As(err, &nr) && nr.Err != nil {
		err = nr.Err
	}
	return withKind(KindStartFailed, 0, fmt.Errorf("cannot start sandbox %q: %w", id, err))
}

// sandboxGone returns the error saying that the sandbox id was stopped or
// removed while a command ran, or nil when it runs.
func (a *app) sandboxGone(ctx context.Context, id string) error {
	info, err := a.lookup(ctx, id)
	var what string
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		what = "removed"
	case err != nil || info.Status == sandbox.StatusRunning:
		return nil
	default:
		what = "stopped"
	}
	return withKind(KindSandboxGone, 0, fmt.Errorf("sandbox %q was %s while the command ran, which killed the command (exit %d)", id, what, ExitSandboxGone))
}

// blockNetwork switches the sandbox id, when it exists with network
// access, to the blocked mode (live when it runs), saying so on stderr.
func (a *app) blockNetwork(ctx context.Context, stderr io.Writer, id string) error {
	info, err := a.lookup(ctx, id)
	if err != nil || info.Network == nil || info.Network.Mode == sandbox.NetworkBlocked {
		return nil // none yet (it will be made blocked), or the engine checks at start
	}
	if err := a.withHandle(ctx, id, func(h Handle) error {
		return h.UpdateNetworkSettings(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked})
	}); err != nil {
		return withKind(KindConfigConflict, 0, fmt.Errorf("sandbox %q has network access (%s), and --block-network could not block it: %w", id, networkText(info.Network.Mode), err))
	}
	if !a.json {
		fmt.Fprintf(stderr, "agentbox: sandbox %q: network blocked (it was: %s); 'agentbox sandbox network %s --default' gives it back\n", id, networkText(info.Network.Mode), id)
	}
	return nil
}
