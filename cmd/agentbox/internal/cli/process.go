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
// background process started by `agentbox spawn`; the process's PID follows
// it. Keeping the processes in sessions of the sandbox's own toolbox server,
// not in the memory of one agentbox process, is what lets a later
// invocation list, inspect and kill them.
const BackgroundSessionPrefix = "agentbox-bg-"

// maxSpawnAttempts bounds the retries of spawn when concurrent spawns race
// for the same PID.
const maxSpawnAttempts = 8

func bgSession(pid int) string { return BackgroundSessionPrefix + strconv.Itoa(pid) }

// bgPID returns the PID of a background session name.
func bgPID(sessionID string) (int, bool) {
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

// parsePID reads a PID argument: "3" or "agentbox-bg-3".
func parsePID(s string) (int, error) {
	if n, ok := bgPID(s); ok {
		return n, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n, nil
	}
	return 0, usagef("PID must be a positive number as shown by 'agentbox ps', got %q", s)
}

func (a *app) spawnCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "spawn [flags] [--] COMMAND [ARG...]",
		Short: "Start a background process in a sandbox and print its PID",
		Long: `Start a background process in a sandbox and print its PID.

The sandbox is created (or restarted) if needed. The process keeps running
after agentbox exits; 'agentbox ps' lists it, 'agentbox logs' shows its
output and 'agentbox kill' ends it. COMMAND and ARGs are treated as by exec.`,
		Example: `  pid=$(agentbox spawn -- python3 -m http.server 8000)
  agentbox logs "$pid"
  agentbox kill "$pid"`,
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
	ID      string `json:"id"`
	PID     string `json:"pid"`
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
	pid, err := createBackgroundSession(ctx, ss)
	if err != nil {
		return fmt.Errorf("sandbox %q: create a session for the process: %w", id, err)
	}
	sid := bgSession(pid)
	if _, err := ss.ExecuteAsync(ctx, sid, line); err != nil {
		_ = ss.DeleteSession(context.WithoutCancel(ctx), sid)
		return fmt.Errorf("sandbox %q: start the process: %w", id, err)
	}
	if a.json {
		return writeJSON(w, spawnResult{ID: id, PID: strconv.Itoa(pid), Session: sid, Command: line})
	}
	fmt.Fprintln(w, pid)
	return nil
}

// createBackgroundSession creates the session of the next free PID. When a
// concurrent spawn took that PID first, it tries the next one.
func createBackgroundSession(ctx context.Context, ss Sessions) (int, error) {
	var lastErr error
	for range maxSpawnAttempts {
		list, err := ss.ListSessions(ctx)
		if err != nil {
			return 0, err
		}
		pid := 1
		for _, s := range list {
			if n, ok := bgPID(s.SessionID); ok && n >= pid {
				pid = n + 1
			}
		}
		err = ss.CreateSession(ctx, bgSession(pid))
		if err == nil {
			return pid, nil
		}
		if _, gerr := ss.GetSession(ctx, bgSession(pid)); gerr != nil {
			return 0, err // not a race: the session does not exist
		}
		lastErr = err
	}
	return 0, fmt.Errorf("gave up after %d attempts racing other spawns: %w", maxSpawnAttempts, lastErr)
}

// bgProcess describes the background process held by a session.
func bgProcess(pid int, s *toolbox.Session) sandbox.ProcessInfo {
	info := sandbox.ProcessInfo{PID: strconv.Itoa(pid), Running: true}
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

func processStatus(p sandbox.ProcessInfo) string {
	switch {
	case p.Running:
		return "running"
	case p.ExitCode != nil:
		return fmt.Sprintf("exited (%d)", *p.ExitCode)
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
		Args:  noArgs,
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
	procs := []sandbox.ProcessInfo{}
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
	t := newTable(w, "PID", "STATUS", "COMMAND")
	for _, p := range procs {
		t.row(p.PID, processStatus(p), p.Command)
	}
	return t.flush()
}

func listBackground(ctx context.Context, ss Sessions) ([]sandbox.ProcessInfo, error) {
	list, err := ss.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	type entry struct {
		pid  int
		info sandbox.ProcessInfo
	}
	var found []entry
	for _, s := range list {
		pid, ok := bgPID(s.SessionID)
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
		found = append(found, entry{pid, bgProcess(pid, &s)})
	}
	slices.SortFunc(found, func(x, y entry) int { return x.pid - y.pid })
	procs := make([]sandbox.ProcessInfo, len(found))
	for i, e := range found {
		procs[i] = e.info
	}
	return procs, nil
}

// lookupBackground finds background process pid in sandbox id.
func (a *app) lookupBackground(ctx context.Context, id string, pid int) (Box, Sessions, *toolbox.Session, error) {
	box, ss, err := a.attach(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if box == nil {
		return nil, nil, nil, notFoundf("no process %d: sandbox %q is not running", pid, id)
	}
	s, err := ss.GetSession(ctx, bgSession(pid))
	if err != nil {
		box.Close(context.WithoutCancel(ctx))
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil, nil, nil, notFoundf("no process %d in sandbox %q (see 'agentbox ps --id %s')", pid, id, id)
		}
		return nil, nil, nil, fmt.Errorf("sandbox %q: process %d: %w", id, pid, err)
	}
	return box, ss, s, nil
}

func (a *app) killCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "kill [flags] PID...",
		Short: "End background processes and forget them",
		Long: `End background processes, with every process they started, and forget them.

A process that had already exited is forgotten too (its output is lost).`,
		Args: minArgs(1, "the PID of a process (see 'agentbox ps')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			pids := make([]int, len(args))
			for i, s := range args {
				n, err := parsePID(s)
				if err != nil {
					return err
				}
				pids[i] = n
			}
			return a.kill(cmd.Context(), cmd.OutOrStdout(), id, pids)
		},
	}
	addIDFlag(c.Flags(), &id)
	return c
}

// killResult is the --json form of kill.
type killResult struct {
	PID string `json:"pid"`
	// Killed is false when the process had already exited.
	Killed   bool `json:"killed"`
	ExitCode *int `json:"exitCode,omitempty"`
}

func (a *app) kill(ctx context.Context, w io.Writer, id string, pids []int) error {
	var results []killResult
	var errs []error
	for _, pid := range pids {
		r, err := a.killOne(ctx, id, pid)
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
			fmt.Fprintf(w, "killed %s\n", r.PID)
		} else {
			fmt.Fprintf(w, "removed %s (it had already exited: %s)\n", r.PID,
				processStatus(sandbox.ProcessInfo{ExitCode: r.ExitCode}))
		}
	}
	if a.json && len(results) > 0 {
		if err := writeJSON(w, results); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func (a *app) killOne(ctx context.Context, id string, pid int) (*killResult, error) {
	box, ss, s, err := a.lookupBackground(ctx, id, pid)
	if err != nil {
		return nil, err
	}
	defer box.Close(context.WithoutCancel(ctx))
	p := bgProcess(pid, s)
	if err := ss.DeleteSession(ctx, s.SessionID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return nil, fmt.Errorf("sandbox %q: kill process %d: %w", id, pid, err)
	}
	return &killResult{PID: p.PID, Killed: p.Running, ExitCode: p.ExitCode}, nil
}

func (a *app) logsCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "logs [flags] PID",
		Short: "Print the output of a background process so far",
		Long: `Print the output of a background process so far: its standard output on
standard output and its standard error on standard error.`,
		Args: exactArgs(1, "the PID of a process (see 'agentbox ps')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID(id); err != nil {
				return err
			}
			pid, err := parsePID(args[0])
			if err != nil {
				return err
			}
			return a.logs(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), id, pid)
		},
	}
	addIDFlag(c.Flags(), &id)
	return c
}

// logsResult is the --json form of logs.
type logsResult struct {
	sandbox.ProcessInfo
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func (a *app) logs(ctx context.Context, w, errw io.Writer, id string, pid int) error {
	box, ss, s, err := a.lookupBackground(ctx, id, pid)
	if err != nil {
		return err
	}
	defer box.Close(context.WithoutCancel(ctx))
	p := bgProcess(pid, s)
	var stdout, stderr []byte
	if len(s.Commands) > 0 {
		stdout, stderr, err = ss.CommandLogs(ctx, s.SessionID, s.Commands[0].ID)
		if err != nil {
			return fmt.Errorf("sandbox %q: output of process %d: %w", id, pid, err)
		}
	}
	if a.json {
		return writeJSON(w, logsResult{ProcessInfo: p, Stdout: string(stdout), Stderr: string(stderr)})
	}
	if _, err := w.Write(stdout); err != nil {
		return err
	}
	_, err = errw.Write(stderr)
	return err
}
