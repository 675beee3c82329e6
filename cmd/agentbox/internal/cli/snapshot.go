package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox-dev/agentbox/local/image"
)

// SnapshotEngine is an [Engine] that freezes sandboxes into snapshots,
// which new sandboxes are made of (OpenOptions.Snapshot).
type SnapshotEngine interface {
	// CreateSnapshot freezes the writable root of the sandbox id into the
	// snapshot name (the sandbox is left stopped).
	CreateSnapshot(ctx context.Context, stateDir, id, name string) (*image.Image, error)
	// Snapshots lists the snapshots.
	Snapshots(ctx context.Context, stateDir string) ([]*image.Image, error)
	// RemoveSnapshot removes one; the error matches image.ErrInUse while a
	// sandbox uses it.
	RemoveSnapshot(ctx context.Context, stateDir, name string) error
}

func (a *app) snapshotCommand() *cobra.Command {
	var from string
	create := &cobra.Command{
		Use:   "create --from SANDBOX NAME",
		Short: "Freeze a sandbox's root into a snapshot (the sandbox is stopped first)",
		Args:  exactArgs(1, "a snapshot name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usagef("snapshot create needs --from SANDBOX (see 'agentbox sandbox ls')")
			}
			se, err := a.snapshots()
			if err != nil {
				return err
			}
			img, err := se.CreateSnapshot(cmd.Context(), a.stateDir, from, args[0])
			if err != nil {
				return notFound(err, from)
			}
			if a.json {
				return writeJSON(cmd.OutOrStdout(), img)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", args[0], img.ID)
			return err
		},
	}
	create.Flags().StringVar(&from, "from", "", "the `SANDBOX` whose root to freeze")
	c := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots"},
		Short:   "Create, list and remove snapshots of sandboxes' roots",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	c.AddCommand(create,
		lsCommand("List snapshots", a.snapshotList),
		&cobra.Command{
			Use:     "rm NAME...",
			Aliases: []string{"remove"},
			Short:   "Remove snapshots no sandbox uses",
			Args:    minArgs(1, "at least one snapshot name (see 'agentbox snapshot ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				se, err := a.snapshots()
				if err != nil {
					return err
				}
				for _, name := range args {
					err := se.RemoveSnapshot(cmd.Context(), a.stateDir, name)
					if errors.Is(err, image.ErrNotFound) {
						return notFoundf("no snapshot %q (see 'agentbox snapshot ls')", name)
					}
					if err != nil {
						return err
					}
					if !a.json {
						fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", name)
					}
				}
				return nil
			},
		},
	)
	return c
}

// snapshots returns the engine's snapshots, or why it has none.
func (a *app) snapshots() (SnapshotEngine, error) {
	se, ok := a.engine.(SnapshotEngine)
	if !ok {
		return nil, errors.New("this engine has no snapshots")
	}
	return se, nil
}

func (a *app) snapshotList(ctx context.Context, w io.Writer) error {
	se, err := a.snapshots()
	if err != nil {
		return err
	}
	all, err := se.Snapshots(ctx, a.stateDir)
	if err != nil {
		return fmt.Errorf("list snapshots in %s: %w", a.stateDir, err)
	}
	if a.json {
		if all == nil {
			all = []*image.Image{}
		}
		return writeJSON(w, all)
	}
	t := newTable(w, "NAME", "ID", "BASE", "LAYERS")
	for _, s := range all {
		t.row(strings.Join(s.Names, ","), shortID(s.ID), shortID(s.Base), fmt.Sprint(len(s.Layers)))
	}
	return t.flush()
}

// shortID returns the first 12 hex digits of a content address.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	return id[:min(len(id), 12)]
}
