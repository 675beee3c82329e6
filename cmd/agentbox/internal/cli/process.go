package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/spf13/cobra"
)

// BackgroundSessionPrefix starts the name of every toolbox session holding a
// background process started by `agentbox spawn`; the process's ID follows
// it. Keeping the processes in sessions of the sandbox's own toolbox server,
// not in the memory of one agentbox process, is what lets a later
// invocation list, inspect and kill them.
//
// The ID is a number agentbox gives each background process of a sandbox
// (1, 2, ...), not the process's PID inside the sandbox.
const BackgroundSessionPrefix = "agentbox-bg-"

// maxSpawnAttempts bounds the retries of spawn when concurrent spawns race
// for the same ID.
const maxSpawnAttempts = 8

// idHelp says what the ID argument of logs and kill is.
const idHelp = `ID is the number 'agentbox spawn' printed, as listed in the ID column of
'agentbox ps': a number agentbox gives the sandbox's background processes,
not a PID. --id names the sandbox, as in every command.`

func bgSession(n int) string { return BackgroundSessionPrefix + strconv.Itoa(n) }

// bgID returns the ID of the background process of a session name.
func bgID(sessionID string) (int, bool) {
	rest, ok := strings.CutPrefix(sessionID, BackgroundSessionPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// parseProcessID reads a process ID argument: "3" or "agentbox-bg-3".
func parseProcessID(s string) (int, error) {
	if n, ok := bgID(s); ok {
		return n, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n, nil
	}
	return 0, usagef("a process ID must be a positive number as shown by 'agentbox ps', got %q", s)
}

func (a *app) spawnCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "spawn [flags] [--] COMMAND [ARG...]",
		Short: "Start a background process in a sandbox and print its ID",
		Long: `Start a background process in a sandbox and print its ID.

The sandbox is created (or restarted) if needed. The process keeps running
after agentbox exits; 'agentbox ps' lists it, 'agentbox logs ID' shows its
output and 'agentbox kill ID' ends it. COMMAND and ARGs are treated as by exec.

The ID is a number agentbox gives the sandbox's background processes (1, 2,
...), not a PID: PIDs inside the sandbox are its own, PID 1 being its init.`,
		Example: `  proc=$(agentbox spawn -- python3 -m http.server 8000)
  agentbox logs "$proc"
  agentbox kill "$proc"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("spawn needs a command: agentbox spawn [flags] -- COMMAND [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			return a.spawn(cmd.Context(), cmd.OutOrStdout(), id, sandbox.CommandLine(args[0], args[1:]))
		},
	}
	c.Flags().SetInterspersed(false)
	addIDFlag(c.Flags(), &id)
	return c
}

// spawnResult is the --json form of spawn.
type spawnResult struct {
	// Sandbox is the sandbox's id, ID the process's.
	Sandbox string `json:"sandbox"`
	ID      int    `json:"id"`
	Session string `json:"session"`
	Command string `json:"command"`
}

func (a *app) spawn(ctx context.Context, w io.Writer, id, line string) error {
	box, err := a.cfg.Engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
	if err != nil {
		return fmt.Errorf("open sandbox %q: %w", id, err)
	}
	defer box.Close(context.WithoutCancel(ctx))
	if _, err := box.Start(ctx); err != nil {
		return fmt.Errorf("start sandbox %q: %w", id, err)
	}
	ss, err := box.Sessions()
	if err != nil {
		return fmt.Errorf("sandbox %q: %w", id, err)
	}
	n, err := createBackgroundSession(ctx, ss)
	if err != nil {
		return fmt.Errorf("sandbox %q: create a session for the process: %w", id, err)
	}
	sid := bgSession(n)
	if _, err := ss.ExecuteAsync(ctx, sid, line); err != nil {
		_ = ss.DeleteSession(context.WithoutCancel(ctx), sid)
		return fmt.Errorf("sandbox %q: start the process: %w", id, err)
	}
	if a.json {
		return writeJSON(w, spawnResult{Sandbox: id, ID: n, Session: sid, Command: line})
	}
	fmt.Fprintln(w, n)
	return nil
}

// createBackgroundSession creates the session of the next free ID and
// returns the ID. When a concurrent spawn took that ID first, it tries the
// next one.
func createBackgroundSession(ctx context.Context, ss Sessions) (int, error) {
	var lastErr error
	for range maxSpawnAttempts {
		list, err := ss.ListSessions(ctx)
		if err != nil {
			return 0, err
		}
		next := 1
		for _, s := range list {
			if n, ok := bgID(s.SessionID); ok && n >= next {
				next = n + 1
			}
		}
		err = ss.CreateSession(ctx, bgSession(next))
		if err == nil {
			return next, nil
		}
		if _, gerr := ss.GetSession(ctx, bgSession(next)); gerr != nil {
			return 0, err // not a race: the session does not exist
		}
		lastErr = err
	}
	return 0, fmt.Errorf("gave up after %d attempts racing other spawns: %w", maxSpawnAttempts, lastErr)
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

// bgProcess describes the background process n held by a session.
func bgProcess(n int, s *toolbox.Session) processInfo {
	info := processInfo{ID: n, Running: true}
	if len(s.Commands) > 0 {
		info.Command = s.Commands[0].Command
		last := s.Commands[len(s.Commands)-1]
		if last.ExitCode != nil {
			info.Running = false
			code := *last.ExitCode
			info.ExitCode = &code
		}
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
// running: it then has no processes.
func (a *app) attach(ctx context.Context, id string) (Box, Sessions, error) {
	info, err := a.cfg.Engine.Lookup(ctx, a.stateDir, id)
	if err != nil {
		return nil, nil, notFound(err, id)
	}
	if info.Status != sandbox.StatusRunning {
		return nil, nil, nil
	}
	box, err := a.cfg.Engine.Open(ctx, OpenOptions{StateDir: a.stateDir, ID: id})
	if err != nil {
		return nil, nil, fmt.Errorf("open sandbox %q: %w", id, err)
	}
	if _, err := box.Start(ctx); err != nil {
		box.Close(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("connect to sandbox %q: %w", id, err)
	}
	ss, err := box.Sessions()
	if err != nil {
		box.Close(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("sandbox %q: %w", id, err)
	}
	return box, ss, nil
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
	box, ss, err := a.attach(ctx, id)
	if err != nil {
		return err
	}
	procs := []processInfo{}
	if box == nil {
		if !a.json {
			fmt.Fprintf(errw, "sandbox %q is not running: it has no processes\n", id)
		}
	} else {
		defer box.Close(context.WithoutCancel(ctx))
		if procs, err = listBackground(ctx, ss); err != nil {
			return fmt.Errorf("sandbox %q: list processes: %w", id, err)
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

func listBackground(ctx context.Context, ss Sessions) ([]processInfo, error) {
	list, err := ss.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	procs := []processInfo{}
	for _, s := range list {
		n, ok := bgID(s.SessionID)
		if !ok {
			continue
		}
		if s.Commands == nil { // a server that lists sessions without their commands
			full, err := ss.GetSession(ctx, s.SessionID)
			if errors.Is(err, sandbox.ErrNotFound) {
				continue // killed meanwhile
			}
			if err != nil {
				return nil, err
			}
			s = *full
		}
		procs = append(procs, bgProcess(n, &s))
	}
	slices.SortFunc(procs, func(x, y processInfo) int { return x.ID - y.ID })
	return procs, nil
}

// lookupBackground finds background process n in sandbox id.
func (a *app) lookupBackground(ctx context.Context, id string, n int) (Box, Sessions, *toolbox.Session, error) {
	box, ss, err := a.attach(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if box == nil {
		return nil, nil, nil, notFoundf("no process %d: sandbox %q is not running", n, id)
	}
	s, err := ss.GetSession(ctx, bgSession(n))
	if err != nil {
		box.Close(context.WithoutCancel(ctx))
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil, nil, nil, notFoundf("no process %d in sandbox %q (see 'agentbox ps --id %s')", n, id, id)
		}
		return nil, nil, nil, fmt.Errorf("sandbox %q: process %d: %w", id, n, err)
	}
	return box, ss, s, nil
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
	for _, n := range ns {
		r, err := a.killOne(ctx, id, n)
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
	if a.json && len(results) > 0 {
		if err := writeJSON(w, results); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func (a *app) killOne(ctx context.Context, id string, n int) (*killResult, error) {
	box, ss, s, err := a.lookupBackground(ctx, id, n)
	if err != nil {
		return nil, err
	}
	defer box.Close(context.WithoutCancel(ctx))
	p := bgProcess(n, s)
	if err := ss.DeleteSession(ctx, s.SessionID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return nil, fmt.Errorf("sandbox %q: kill process %d: %w", id, n, err)
	}
	return &killResult{ID: p.ID, Killed: p.Running, ExitCode: p.ExitCode}, nil
}

func (a *app) logsCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "logs [flags] ID",
		Short: "Print the output of a background process so far",
		Long: `Print the output of a background process so far: its standard output on
standard output and its standard error on standard error.

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
			return a.logs(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), id, n)
		},
	}
	addIDFlag(c.Flags(), &id)
	return c
}

// logsResult is the --json form of logs.
type logsResult struct {
	processInfo
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func (a *app) logs(ctx context.Context, w, errw io.Writer, id string, n int) error {
	box, ss, s, err := a.lookupBackground(ctx, id, n)
	if err != nil {
		return err
	}
	defer box.Close(context.WithoutCancel(ctx))
	p := bgProcess(n, s)
	var stdout, stderr []byte
	if len(s.Commands) > 0 {
		stdout, stderr, err = ss.CommandLogs(ctx, s.SessionID, s.Commands[0].ID)
		if err != nil {
			return fmt.Errorf("sandbox %q: output of process %d: %w", id, n, err)
		}
	}
	if a.json {
		return writeJSON(w, logsResult{processInfo: p, Stdout: string(stdout), Stderr: string(stderr)})
	}
	if _, err := w.Write(stdout); err != nil {
		return err
	}
	_, err = errw.Write(stderr)
	return err
}
