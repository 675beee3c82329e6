package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

// BackgroundSessionPrefix starts the name of the toolbox session holding a
// background process of the local engine (the engines built on the toolbox
// API name it so); the process's ID follows it. spawn --json reports the
// session, and logs and kill take its name for an ID.
//
// The processes live in the sandbox, not in the memory of one agentbox
// process: any later invocation lists, inspects and kills them through the
// sandbox's process manager (see sandbox.ProcessManager). The ID is the
// number the sandbox gives each background process (1, 2, ...), not the
// process's PID inside the sandbox.
const BackgroundSessionPrefix = "agentbox-bg-"

// idHelp says what the ID argument of logs and kill is.
const idHelp = `ID is the number 'agentbox spawn' printed, as listed in the ID column of
'agentbox ps': a number agentbox gives the sandbox's background processes,
not a PID. --id names the sandbox, as in every command.`

// processNumber reads a process ID as the sandbox writes it: a positive
// decimal number.
func processNumber(pid string) (int, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || strconv.Itoa(n) != pid {
		return 0, false
	}
	return n, true
}

// parseProcessID reads a process ID argument: "3" or "agentbox-bg-3".
func parseProcessID(s string) (int, error) {
	if n, err := strconv.Atoi(strings.TrimPrefix(s, BackgroundSessionPrefix)); err == nil && n > 0 {
		return n, nil
	}
	return 0, usagef("a process ID must be a positive number as shown by 'agentbox ps', got %q", s)
}

// spawnKillAfter is how long after the SIGTERM of spawn --timeout a
// process that is still running gets SIGKILL (timeout(1)'s --kill-after).
const spawnKillAfter = 10 * time.Second

func (a *app) spawnCommand() *cobra.Command {
	var f commandFlags
	c := &cobra.Command{
		Use:   "spawn [flags] [--] COMMAND [ARG...]",
		Short: "Start a background process in a sandbox and print its ID",
		Long: `Start a background process in a sandbox and print its ID.

The sandbox is created (or restarted) if needed. The process keeps running
after agentbox exits; 'agentbox ps' lists it, 'agentbox logs ID' shows its
output ('agentbox logs -f ID' follows it to its end) and 'agentbox kill ID'
ends it. COMMAND and ARGs are treated as by exec; the process reads an empty
input.

--timeout is enforced inside the sandbox, since agentbox does not stay to
watch: the command runs under timeout(1), which the sandbox must have
(coreutils or busybox), and ps shows it so. When the time is up the process
and its process group get SIGTERM and the process exits 124; one still
running 10s later gets SIGKILL and exits 137.

The ID is a number agentbox gives the sandbox's background processes (1, 2,
...), not a PID: PIDs inside the sandbox are its own, PID 1 being its init.`,
		Example: `  proc=$(agentbox spawn -- python3 -m http.server 8000)
  agentbox logs "$proc"
  agentbox kill "$proc"
  agentbox spawn --timeout 10m -e MODE=fast -w /tmp -- ./long-job.sh
  agentbox logs -f "$(agentbox spawn -- make test)"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("spawn needs a command: agentbox spawn [flags] -- COMMAND [ARG...]")
			}
			return checkLine("spawn", sandbox.CommandLine(args[0], args[1:]))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			line := sandbox.CommandLine(args[0], args[1:])
			if opts.Timeout > 0 {
				line = timeoutLine(line, opts.Timeout)
			}
			// The handle does not enforce a timeout: nobody would be left to
			// once agentbox exits.
			opts.Timeout = -1
			return a.spawn(cmd.Context(), cmd.OutOrStdout(), f.id, line, opts)
		},
	}
	f.add(c.Flags(), "end the process after this long, e.g. 30s or 5m, with timeout(1) in the sandbox (default and 0: never)")
	return c
}

// timeoutLine wraps line so that timeout(1) ends it after d inside the
// sandbox. The line runs in the shell of the session ($BASH when it is
// bash, else sh), as it would without a timeout.
func timeoutLine(line string, d time.Duration) string {
	return fmt.Sprintf(`timeout -k %s %s "${BASH:-sh}" -c %s`, seconds(spawnKillAfter), seconds(d), sandbox.ShellQuote(line))
}

// seconds writes d as a number of seconds, as timeout(1) reads it.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// spawnResult is the --json form of spawn.
type spawnResult struct {
	// Sandbox is the sandbox's id, ID the process's.
	Sandbox string `json:"sandbox"`
	ID      int    `json:"id"`
	Session string `json:"session"`
	Command string `json:"command"`
}

func (a *app) spawn(ctx context.Context, w io.Writer, id, line string, opts *sandbox.ExecOptions) error {
	box, err := a.engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", id, err)
	}
	// Detach, not close: the process outlives this invocation.
	defer box.Detach(context.WithoutCancel(ctx))
	if _, err := box.Start(ctx); err != nil {
		return startFailed(ctx, id, err)
	}
	p, err := box.Processes().Spawn(ctx, line, opts)
	if err != nil {
		return fmt.Errorf("sandbox %q: start the process: %w", id, err)
	}
	n, err := processID(p.PID())
	if err != nil {
		return fmt.Errorf("sandbox %q: %w", id, err)
	}
	if a.json {
		return writeJSON(w, spawnResult{Sandbox: id, ID: n, Session: BackgroundSessionPrefix + p.PID(), Command: line})
	}
	fmt.Fprintln(w, n)
	return nil
}

// processID reads the id of a process as the engine gives it.
func processID(pid string) (int, error) {
	n, ok := processNumber(pid)
	if !ok {
		return 0, fmt.Errorf("the engine gave the process id %q, not a positive number", pid)
	}
	return n, nil
}

// processInfo describes a background process; it is the --json form of
// ps's entries.
type processInfo struct {
	// ID is the process's number among the sandbox's background processes
	// (not a PID).
	ID       int    `json:"id"`
	Command  string `json:"command"`
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// describe describes the process n seen through p.
func describe(n int, p sandbox.Process) processInfo {
	info := processInfo{ID: n, Command: p.Command(), Running: true}
	if code, exited := p.ExitCode(); exited {
		info.Running, info.ExitCode = false, &code
	}
	return info
}

func processStatus(running bool, exitCode *int) string {
	switch {
	case running:
		return "running"
	case exitCode != nil:
		return fmt.Sprintf("exited (%d)", *exitCode)
	default:
		return "exited"
	}
}

// attach connects to a sandbox that runs already, without creating or
// restarting it. It returns a nil Box when the sandbox exists but is not
// running: it then has no processes. The caller detaches the Box.
func (a *app) attach(ctx context.Context, id string) (Box, error) {
	info, err := a.lookup(ctx, id)
	if err != nil {
		return nil, notFound(err, id)
	}
	if info.Status != sandbox.StatusRunning {
		return nil, nil
	}
	box, err := a.engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
	if err != nil {
		return nil, fmt.Errorf("open sandbox %q: %w", id, err)
	}
	if _, err := box.Start(ctx); err != nil {
		box.Detach(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("connect to sandbox %q: %w", id, err)
	}
	return box, nil
}

func (a *app) psCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "ps [flags]",
		Short: "List the background processes of a sandbox",
		Long: `List the background processes of a sandbox, by the ID 'agentbox spawn'
printed for each. The ID is a number agentbox gives them (1, 2, ...), not a
PID; 'agentbox logs ID' and 'agentbox kill ID' take it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			return a.ps(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), id)
		},
	}
	addIDFlag(c.Flags(), &id)
	return c
}

func (a *app) ps(ctx context.Context, w, errw io.Writer, id string) error {
	box, err := a.attach(ctx, id)
	if err != nil {
		return err
	}
	procs := []processInfo{}
	if box == nil {
		if !a.json {
			fmt.Fprintf(errw, "sandbox %q is not running: it has no processes\n", id)
		}
	} else {
		defer box.Detach(context.WithoutCancel(ctx))
		list, err := box.Processes().List(ctx)
		if err != nil {
			return fmt.Errorf("sandbox %q: list processes: %w", id, err)
		}
		for _, in := range list {
			n, err := processID(in.PID)
			if err != nil {
				return fmt.Errorf("sandbox %q: %w", id, err)
			}
			procs = append(procs, processInfo{ID: n, Command: in.Command, Running: in.Running, ExitCode: in.ExitCode})
		}
	}
	if a.json {
		return writeJSON(w, procs)
	}
	t := newTable(w, "ID", "STATUS", "COMMAND")
	for _, p := range procs {
		t.row(strconv.Itoa(p.ID), processStatus(p.Running, p.ExitCode), p.Command)
	}
	return t.flush()
}

// withProcesses runs f with the process manager of sandbox id, which must
// be running, and detaches from the sandbox afterwards.
func (a *app) withProcesses(ctx context.Context, id string, f func(sandbox.ProcessManager) error) error {
	box, err := a.attach(ctx, id)
	if err != nil {
		return err
	}
	if box == nil {
		return notFoundf("sandbox %q is not running: it has no processes", id)
	}
	defer box.Detach(context.WithoutCancel(ctx))
	return f(box.Processes())
}

// noProcess is the error for a process the sandbox does not know.
func noProcess(id string, n int) error {
	return notFoundf("no process %d in sandbox %q (see 'agentbox ps --id %s')", n, id, id)
}

func (a *app) killCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "kill [flags] ID...",
		Short: "End background processes and forget them",
		Long: `End background processes, with every process they started, and forget them.

A process that had already exited is forgotten too (its output is lost).

` + idHelp,
		Args: minArgs(1, "the ID of a process (see 'agentbox ps')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			ns := make([]int, len(args))
			for i, s := range args {
				n, err := parseProcessID(s)
				if err != nil {
					return err
				}
				ns[i] = n
			}
			return a.kill(cmd.Context(), cmd.OutOrStdout(), id, ns)
		},
	}
	addIDFlag(c.Flags(), &id)
	return c
}

// killResult is the --json form of kill.
type killResult struct {
	ID int `json:"id"`
	// Killed is false when the process had already exited.
	Killed   bool `json:"killed"`
	ExitCode *int `json:"exitCode,omitempty"`
}

func (a *app) kill(ctx context.Context, w io.Writer, id string, ns []int) error {
	var results []killResult
	var errs []error
	err := a.withProcesses(ctx, id, func(pm sandbox.ProcessManager) error {
		for _, n := range ns {
			r, err := killOne(ctx, pm, id, n)
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
				continue
			}
			if a.json {
				results = append(results, *r)
			} else if r.Killed {
				fmt.Fprintf(w, "killed %d\n", r.ID)
			} else {
				fmt.Fprintf(w, "removed %d (it had already exited: %s)\n", r.ID, processStatus(false, r.ExitCode))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if a.json && len(results) > 0 {
		if err := writeJSON(w, results); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// killOne kills process n, or forgets it when it had exited.
func killOne(ctx context.Context, pm sandbox.ProcessManager, id string, n int) (*killResult, error) {
	pid := strconv.Itoa(n)
	// Get fetches an exited process one last time and forgets it.
	p, err := pm.Get(ctx, pid)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, noProcess(id, n)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: process %d: %w", id, n, err)
	}
	r := &killResult{ID: n}
	if _, exited := p.ExitCode(); !exited {
		if r.Killed, err = pm.Kill(ctx, pid); err != nil {
			return nil, fmt.Errorf("sandbox %q: kill process %d: %w", id, n, err)
		}
	}
	if code, exited := p.ExitCode(); exited && !r.Killed {
		r.ExitCode = &code
	}
	return r, nil
}

func (a *app) logsCommand() *cobra.Command {
	var (
		id     string
		follow bool
	)
	c := &cobra.Command{
		Use:   "logs [flags] ID",
		Short: "Print the output of a background process",
		Long: `Print the output of a background process so far: its standard output on
standard output and its standard error on standard error.

With -f, follow the output until the process exits, then exit with its exit
code (137 when the sandbox was stopped or removed meanwhile). Interrupting
agentbox stops the following, not the process. With -f and --json, print a
stream of JSON lines as exec does (see 'agentbox help json').

` + idHelp,
		Args: exactArgs(1, "the ID of a process (see 'agentbox ps')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			n, err := parseProcessID(args[0])
			if err != nil {
				return err
			}
			if follow {
				out := guardOutput(cmd)
				defer out.cancel(nil)
				return out.explain(a.follow(out.ctx, out.stdout, out.stderr, id, n))
			}
			return a.logs(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), id, n)
		},
	}
	addIDFlag(c.Flags(), &id)
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the process exits, and exit with its exit code")
	return c
}

// logsResult is the --json form of logs.
type logsResult struct {
	processInfo
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func (a *app) logs(ctx context.Context, w, errw io.Writer, id string, n int) error {
	return a.withProcesses(ctx, id, func(pm sandbox.ProcessManager) error {
		// Attach, not Get: reading the output does not forget the process.
		p, err := attachProcess(ctx, pm, id, n, &sandbox.AttachOptions{MaxRetainedBytes: sandbox.Unlimited})
		if err != nil {
			return err
		}
		stdout, stderr := p.Stdout(), p.Stderr()
		if a.json {
			return writeJSON(w, logsResult{processInfo: describe(n, p), Stdout: stdout, Stderr: stderr})
		}
		if _, err := io.WriteString(w, stdout); err != nil {
			return err
		}
		_, err = io.WriteString(errw, stderr)
		return err
	})
}

// attachProcess attaches to process n of sandbox id.
func attachProcess(ctx context.Context, pm sandbox.ProcessManager, id string, n int, opts *sandbox.AttachOptions) (sandbox.Process, error) {
	p, err := pm.Attach(ctx, strconv.Itoa(n), opts)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, noProcess(id, n)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: output of process %d: %w", id, n, err)
	}
	return p, nil
}

// follow prints the output of process n as it comes until the process
// exits, and exits with its code.
func (a *app) follow(ctx context.Context, w, errw io.Writer, id string, n int) error {
	return a.withProcesses(ctx, id, func(pm sandbox.ProcessManager) error {
		opts := &sandbox.AttachOptions{Stdout: w, Stderr: errw, MaxRetainedBytes: streamTail}
		var events *eventStream
		flush := func() {}
		if a.json {
			events = newEventStream(w)
			if err := events.start(startEvent{Sandbox: id, Process: n}); err != nil {
				return err
			}
			stdout, stderr := events.output("stdout"), events.output("stderr")
			opts.Stdout, opts.Stderr = stdout, stderr
			flush = func() { stdout.Close(); stderr.Close() }
		}
		p, err := attachProcess(ctx, pm, id, n, opts)
		if err != nil {
			return err
		}
		res, err := p.Wait(ctx)
		flush()
		if ctx.Err() == nil && (err != nil || res.ExitCode > 128) {
			if gone := a.sandboxGone(ctx, id); gone != nil {
				return gone
			}
		}
		if err != nil {
			return fmt.Errorf("sandbox %q: follow process %d: %w", id, n, err)
		}
		return a.finish(events, errw, res)
	})
}
