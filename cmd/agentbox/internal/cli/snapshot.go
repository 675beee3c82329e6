package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// SnapshotEngine is an [Engine] with snapshots: named root file systems
// new sandboxes are made of (OpenOptions.Snapshot). Each engine makes
// them its own way (the local engine freezes a sandbox, the daytona
// engine builds an image) and refuses a SnapshotSource it cannot make
// with an error matching sandbox.ErrUnsupported.
type SnapshotEngine interface {
	// CreateSnapshot makes the snapshot name of src, writing the progress
	// and build logs to logs.
	CreateSnapshot(ctx context.Context, stateDir, name string, src SnapshotSource, logs io.Writer) (*Snapshot, error)
	// Snapshots lists the snapshots.
	Snapshots(ctx context.Context, stateDir string) ([]Snapshot, error)
	// RemoveSnapshot removes one; the error matches image.ErrInUse while a
	// sandbox uses it, and image.ErrNotFound or sandbox.ErrNotFound when
	// there is none.
	RemoveSnapshot(ctx context.Context, stateDir, name string) error
}

// SnapshotSource is what a new snapshot is made of: exactly one of
// Sandbox, Image, Dockerfile and BaseImage.
type SnapshotSource struct {
	// Sandbox is the id of a sandbox whose root is frozen (a running
	// sandbox keeps running).
	Sandbox string
	// Image is an image reference, such as python:3.12-slim.
	Image string
	// Dockerfile is the content of a Dockerfile to build.
	Dockerfile string
	// BaseImage is the base image of a declarative image, whose Run
	// commands are run on it in order.
	BaseImage string
	Run       []string
	// CPU (cores), Memory and Disk (GiB) size the snapshot's sandboxes
	// where the engine supports it; 0: its default.
	CPU, Memory, Disk int
}

// Snapshot describes a snapshot.
type Snapshot struct {
	Name string `json:"name"`
	// ID is its content address (local) or id (daytona).
	ID string `json:"id"`
	// State is "active" when sandboxes can be made of it; others are the
	// engine's (building, build_failed, …).
	State string `json:"state"`
	// Source is what it was made of: a base image's id or an image name.
	Source string `json:"source,omitempty"`
	// Reason says why a snapshot failed.
	Reason string `json:"reason,omitempty"`
	// Size is its size in bytes, when known.
	Size    int64     `json:"size,omitempty"`
	Created time.Time `json:"created,omitzero"`
}

func (a *app) snapshotCommand() *cobra.Command {
	var (
		src            SnapshotSource
		dockerfilePath string
	)
	create := &cobra.Command{
		Use: "create NAME (--from SANDBOX | --image REF | --dockerfile FILE | --from-image BASE [--run CMD]...)",
		Short: "Make a snapshot: freeze a sandbox's root (local engine), or build an image " +
			"(daytona engine) with its build logs on stderr",
		Args: exactArgs(1, "a snapshot name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, set := range []bool{src.Sandbox != "", src.Image != "", dockerfilePath != "", src.BaseImage != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				return usagef("snapshot create needs exactly one of --from SANDBOX, --image REF, --dockerfile FILE and --from-image BASE")
			}
			if len(src.Run) > 0 && src.BaseImage == "" {
				return usagef("--run goes with --from-image BASE: the commands run on that base")
			}
			if src.CPU < 0 || src.Memory < 0 || src.Disk < 0 {
				return usagef("--cpu, --memory and --disk must not be negative")
			}
			if dockerfilePath != "" {
				data, err := readDockerfile(cmd.InOrStdin(), dockerfilePath)
				if err != nil {
					return err
				}
				src.Dockerfile = data
			}
			se, err := a.snapshots()
			if err != nil {
				return err
			}
			snap, err := se.CreateSnapshot(cmd.Context(), a.stateDir, args[0], src, cmd.ErrOrStderr())
			if err != nil {
				if src.Sandbox != "" {
					return notFound(err, src.Sandbox)
				}
				return err
			}
			if a.json {
				return writeJSON(cmd.OutOrStdout(), snap)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", snap.Name, snap.ID)
			return err
		},
	}
	f := create.Flags()
	f.StringVar(&src.Sandbox, "from", "", "the `SANDBOX` whose root to freeze (local engine)")
	f.StringVar(&src.Image, "image", "", "the image `REF` to make the snapshot of, such as python:3.12-slim")
	f.StringVar(&dockerfilePath, "dockerfile", "", "the Dockerfile `FILE` to build (- for stdin); no build context")
	f.StringVar(&src.BaseImage, "from-image", "", "the `BASE` image of a declarative image")
	f.StringArrayVar(&src.Run, "run", nil, "a shell `COMMAND` to run on --from-image's base (repeatable, in order)")
	f.IntVar(&src.CPU, "cpu", 0, "CPU cores of the snapshot's sandboxes (daytona engine)")
	f.IntVar(&src.Memory, "memory", 0, "memory of the snapshot's sandboxes in GiB (daytona engine)")
	f.IntVar(&src.Disk, "disk", 0, "disk of the snapshot's sandboxes in GiB (daytona engine)")
	c := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots"},
		Short:   "Create, list and remove snapshots (sandboxes' roots, or images built for them)",
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
					if errors.Is(err, image.ErrNotFound) || errors.Is(err, sandbox.ErrNotFound) {
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

// readDockerfile returns the content of the Dockerfile at path, stdin for
// "-".
func readDockerfile(stdin io.Reader, path string) (string, error) {
	var data []byte
	var err error
	if path == "-" {
		if stdin == nil {
			return "", usagef("--dockerfile -: no standard input to read the Dockerfile from")
		}
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("--dockerfile: %v", err)
	}
	if strings.TrimSpace(string(data)) == "" {
		return "", usagef("--dockerfile %s is empty", path)
	}
	return string(data), nil
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
		return fmt.Errorf("list snapshots: %w", err)
	}
	if a.json {
		if all == nil {
			all = []Snapshot{}
		}
		return writeJSON(w, all)
	}
	t := newTable(w, "NAME", "ID", "STATE", "SOURCE")
	for _, s := range all {
		t.row(s.Name, shortID(s.ID), s.State, shortID(s.Source))
	}
	return t.flush()
}

// shortID returns the first 12 hex digits of a content address; other
// ids as they are.
func shortID(id string) string {
	if hex, ok := strings.CutPrefix(id, "sha256:"); ok {
		return hex[:min(len(hex), 12)]
	}
	return id
}
