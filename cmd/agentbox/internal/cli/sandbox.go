package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/cobra"
)

func (a *app) sandboxCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes", "sb"},
		Short:   "List, inspect, stop and remove sandboxes; change their network",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	c.AddCommand(
		lsCommand("List sandboxes", a.sandboxList),
		&cobra.Command{
			Use:   "info ID",
			Short: "Describe a sandbox",
			Args:  exactArgs(1, "a sandbox id (see 'agentbox sandbox ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.sandboxInfo(cmd.Context(), cmd.OutOrStdout(), args[0])
			},
		},
		&cobra.Command{
			Use:   "stop ID...",
			Short: "Stop sandboxes: end their processes, keep their files",
			Args:  minArgs(1, "at least one sandbox id (see 'agentbox sandbox ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.sandboxEach(cmd.Context(), cmd.OutOrStdout(), args, "stopped", a.onHandle(Handle.Stop))
			},
		},
		&cobra.Command{
			Use:     "rm ID...",
			Aliases: []string{"remove"},
			Short:   "Remove sandboxes: their processes, files and state",
			Args:    minArgs(1, "at least one sandbox id (see 'agentbox sandbox ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.sandboxEach(cmd.Context(), cmd.OutOrStdout(), args, "removed", a.onHandle(Handle.Destroy))
			},
		},
		a.networkCommand(),
		a.forkCommand(),
	)
	c.AddCommand(a.pauseCommands()...)
	return c
}

// minArgs requires at least n positional arguments named by what.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

// notFound rewrites an engine's not-found error about sandbox id into a
// message that says what to do; other errors pass through.
func notFound(err error, id string) error {
	if errors.Is(err, sandbox.ErrNotFound) {
		return notFoundf("no sandbox %q (see 'agentbox sandbox ls')", id)
	}
	return err
}

// SummaryLister is an Engine that lists its sandboxes more cheaply when
// only what 'agentbox sandbox ls' prints is needed: each Info's ID,
// Status, CreatedAt and LastUsedAt, as truthful as List's. The local
// engine is one (local.ListSummaries); --json lists with List.
type SummaryLister interface {
	ListSummaries(ctx context.Context, stateDir string) ([]sandbox.Info, error)
}

func (a *app) sandboxList(ctx context.Context, w io.Writer) error {
	list := a.engine.List
	if sl, ok := a.engine.(SummaryLister); ok && !a.json {
		list = sl.ListSummaries
	}
	infos, err := list(ctx, a.stateDir)
	if err != nil {
		return fmt.Errorf("list sandboxes in %s: %w", a.stateDir, err)
	}
	slices.SortFunc(infos, func(x, y sandbox.Info) int { return strings.Compare(x.ID, y.ID) })
	if a.json {
		if infos == nil {
			infos = []sandbox.Info{}
		}
		return writeJSON(w, infos)
	}
	now := time.Now()
	bw := bufio.NewWriter(w) // one write, not one a line
	t := newTable(bw, "ID", "STATUS", "CREATED", "LAST USED")
	for _, in := range infos {
		t.row(in.ID, string(in.Status), ago(now, in.CreatedAt), ago(now, in.LastUsedAt))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// withHandle runs f on the handle of the existing sandbox id
// (Engine.Find), or returns Find's error.
func (a *app) withHandle(ctx context.Context, id string, f func(h Handle) error) error {
	h, err := a.engine.Find(ctx, a.stateDir, id)
	if err != nil {
		return err
	}
	return f(h)
}

// onHandle returns act as an act of sandboxEach: act on the handle of the
// sandbox (withHandle).
func (a *app) onHandle(act func(h Handle, ctx context.Context) error) func(ctx context.Context, stateDir, id string) error {
	return func(ctx context.Context, _, id string) error {
		return a.withHandle(ctx, id, func(h Handle) error { return act(h, ctx) })
	}
}

// lookup describes the existing sandbox id; the error matches
// sandbox.ErrNotFound when there is none.
func (a *app) lookup(ctx context.Context, id string) (*sandbox.Info, error) {
	h, err := a.engine.Find(ctx, a.stateDir, id)
	if err != nil {
		return nil, err
	}
	return h.Info(ctx)
}

func (a *app) sandboxInfo(ctx context.Context, w io.Writer, id string) error {
	in, err := a.lookup(ctx, id)
	if err != nil {
		return notFound(err, id)
	}
	if a.json {
		return writeJSON(w, in)
	}
	now := time.Now()
	t := newTable(w)
	t.row("ID:", in.ID)
	if in.Name != "" {
		t.row("Name:", in.Name)
	}
	t.row("Provider:", in.Provider)
	t.row("Status:", string(in.Status))
	t.row("Created:", stamp(now, in.CreatedAt))
	if !in.LastUsedAt.IsZero() {
		t.row("Last used:", stamp(now, in.LastUsedAt))
	}
	if !in.TimeoutAt.IsZero() {
		t.row("Stops at:", stamp(now, in.TimeoutAt))
	}
	if id := in.Identity; id != nil {
		t.row("User:", identityText(id))
		if id.HostUIDCount > 0 {
			t.row("Host uids:", hostUIDsText(id))
		}
	}
	if n := in.Network; n != nil {
		networkRows(t, n)
	}
	if l := in.Limits; l != nil {
		t.row("Limits:", limitsText(l))
	}
	if r := in.Usage; r != nil {
		t.row("Resources:", resources(r))
	}
	for i, m := range in.Mounts {
		label := ""
		if i == 0 {
			label = "Mounts:"
		}
		t.row(label, mountText(m))
	}
	for i, k := range slices.Sorted(maps.Keys(in.Metadata)) {
		label := ""
		if i == 0 {
			label = "Metadata:"
		}
		t.row(label, k+"="+in.Metadata[k])
	}
	return t.flush()
}

// sandboxResult is the --json form of stop and rm.
type sandboxResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// sandboxEach applies act to every id, reporting each success as done. It
// goes on after a failure and returns the first error. (image rm uses it
// too, with image names for ids.)
func (a *app) sandboxEach(ctx context.Context, w io.Writer, ids []string, done string, act func(ctx context.Context, stateDir, id string) error) error {
	var results []sandboxResult
	var errs []error
	for _, id := range ids {
		if err := act(ctx, a.stateDir, id); err != nil {
			errs = append(errs, notFound(err, id))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if a.json {
			results = append(results, sandboxResult{ID: id, Status: done})
		} else {
			fmt.Fprintf(w, "%s %s\n", done, id)
		}
	}
	if a.json && len(results) > 0 {
		if err := writeJSON(w, results); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func resources(r *sandbox.Usage) string {
	var parts []string
	if r.CPUCores > 0 {
		parts = append(parts, fmt.Sprintf("%g CPU available", r.CPUCores))
	}
	if r.CPUPercent > 0 {
		parts = append(parts, fmt.Sprintf("%.1f%% CPU used", r.CPUPercent))
	}
	if r.MemoryMB > 0 || r.MemoryUsedMB > 0 {
		parts = append(parts, usage("memory", r.MemoryUsedMB, r.MemoryMB))
	}
	if r.DiskMB > 0 || r.DiskUsedMB > 0 {
		parts = append(parts, usage("disk", r.DiskUsedMB, r.DiskMB))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

func usage(what string, used, limit int64) string {
	switch {
	case limit == 0:
		return fmt.Sprintf("%s %d MB used (no limit)", what, used)
	case used == 0:
		return fmt.Sprintf("%s %d MB", what, limit)
	default:
		return fmt.Sprintf("%s %d/%d MB", what, used, limit)
	}
}

// identityText describes who commands run as.
func identityText(id *sandbox.Identity) string {
	s := fmt.Sprintf("%s (uid %d, gid %d", id.User, id.UID, id.GID)
	if id.UID == 0 {
		s += ": root of the sandbox's own user namespace"
	}
	if id.Capabilities != "" {
		s += ", capabilities: " + id.Capabilities
	}
	return s + "), HOME=" + id.Home
}

// hostUIDsText says which host uids the sandbox's ids are.
func hostUIDsText(id *sandbox.Identity) string {
	if id.HostUIDCount == 1 {
		return fmt.Sprintf("%d (uid %d inside; the sandbox has no other)", id.HostUID, id.UID)
	}
	return fmt.Sprintf("%d-%d (uids 0-%d inside, unprivileged on the host)", id.HostUID, id.HostUID+id.HostUIDCount-1, id.HostUIDCount-1)
}

// networkText describes a network mode.
func networkText(m sandbox.NetworkMode) string {
	switch m {
	case sandbox.NetworkHost:
		return "shared with the host (the host's interfaces and loopback services; unsafe)"
	case sandbox.NetworkPublic:
		return "the public internet only (not the host, its networks, private or link-local addresses, other sandboxes)"
	case sandbox.NetworkBlocked:
		return "blocked (loopback only)"
	case sandbox.NetworkAllowList:
		return "listed address ranges only (and listed domains, through an egress proxy)"
	case sandbox.NetworkDomainAllowList:
		return "listed domains only, through an egress proxy"
	}
	return string(m)
}

// limitsText says which limits are enforced.
func limitsText(l *sandbox.Limits) string {
	var parts []string
	for _, lim := range []struct {
		set  bool
		text string
	}{
		{l.CPUCores > 0, fmt.Sprintf("%g CPU", l.CPUCores)},
		{l.MemoryMB > 0, fmt.Sprintf("memory %d MB", l.MemoryMB)},
		{l.Processes > 0, fmt.Sprintf("%d processes", l.Processes)},
		{l.DiskMB > 0, fmt.Sprintf("disk %d MB", l.DiskMB)},
	} {
		if lim.set {
			parts = append(parts, lim.text)
		}
	}
	s := "none enforced"
	if len(parts) > 0 {
		s = strings.Join(parts, ", ")
	}
	if l.Note != "" {
		s += " (" + l.Note + ")"
	}
	return s
}

// mountText describes a mount in a line: path, filesystem and, for a
// bucket, its state and error.
func mountText(m sandbox.MountInfo) string {
	s := m.Path + " (" + m.Filesystem + ")"
	if m.ReadOnly && !strings.Contains(m.Filesystem, "read-only") {
		s += " read-only"
	}
	if m.State != "" {
		s += " " + string(m.State)
	}
	if m.Error != "" {
		s += ": " + m.Error
	}
	return s
}
