package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// daytonaEngine is the cli.Engine of the daytona engine (--engine
// daytona): the sandboxes of a Daytona control plane, Daytona's cloud or
// an agentbox serve, reached with DAYTONA_API_KEY (or DAYTONA_JWT_TOKEN
// and DAYTONA_ORGANIZATION_ID), DAYTONA_API_URL and DAYTONA_TARGET, from
// the environment or a .env file. A command's sandbox id is the Daytona
// sandbox's name. The state dir holds nothing of it.
type daytonaEngine struct{}

func (daytonaEngine) DefaultStateDir() (string, error) { return local.DefaultStateDir() }

func (daytonaEngine) DefaultStateDirHelp() string { return localEngine{}.DefaultStateDirHelp() }

func (daytonaEngine) CheckStateDir(string) error { return nil }

// daytonaBox is a daytona sandbox as the CLI holds it.
type daytonaBox struct{ *daytona.Sandbox }

// Detach lets go of the sandbox, which keeps running with its processes.
func (b daytonaBox) Detach(ctx context.Context) error { return b.Close(ctx) }

func (daytonaEngine) Open(_ context.Context, o cli.OpenOptions) (cli.Box, error) {
	if o.ReadOnlyRoot {
		return nil, fmt.Errorf("%w: --read-only-root is the local engine's: a Daytona sandbox's root is its image's, writable", sandbox.ErrInvalidArgument)
	}
	// AllowFUSE: Daytona's sandboxes allow FUSE mounts already.
	s, err := daytona.New(daytona.Options{ID: o.ID, Image: o.Image, Snapshot: o.Snapshot, Network: o.Network, Resources: o.Resources, Secrets: o.Secrets})
	if err != nil {
		return nil, err
	}
	return daytonaBox{s}, nil
}

// withClient calls f with a control-plane client made from the
// environment.
func withClient[T any](f func(*daytona.Client) (T, error)) (T, error) {
	c, err := daytona.NewClient(daytona.Config{})
	if err != nil {
		var zero T
		return zero, err
	}
	defer c.Close()
	return f(c)
}

func (daytonaEngine) List(ctx context.Context, _ string) ([]sandbox.Info, error) {
	return withClient(func(c *daytona.Client) ([]sandbox.Info, error) {
		var out []sandbox.Info
		for sb, err := range c.Sandboxes(ctx, daytona.ListOptions{}) {
			if err != nil {
				return nil, err
			}
			out = append(out, *sb.Info())
		}
		return out, nil
	})
}

// Find returns the handle of the sandbox named id. It asks the control
// plane nothing: each of the handle's methods is one call, which fails
// with an error matching sandbox.ErrNotFound when there is no such
// sandbox.
func (daytonaEngine) Find(_ context.Context, _, id string) (cli.Handle, error) {
	return daytonaHandle{id: id}, nil
}

// daytonaHandle is a cli.Handle of the daytona engine: the sandbox named
// id, each operation a control-plane call.
type daytonaHandle struct{ id string }

func (h daytonaHandle) Info(ctx context.Context) (*sandbox.Info, error) {
	return withClient(func(c *daytona.Client) (*sandbox.Info, error) {
		sb, err := c.GetSandbox(ctx, h.id)
		if err != nil {
			return nil, err
		}
		return sb.Info(), nil
	})
}

func (h daytonaHandle) Destroy(ctx context.Context) error {
	_, err := withClient(func(c *daytona.Client) (struct{}, error) { return struct{}{}, c.DeleteAndWait(ctx, h.id) })
	return err
}

func (h daytonaHandle) Stop(ctx context.Context) error {
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) { return c.StopAndWait(ctx, h.id, false) })
	return err
}

func (h daytonaHandle) UpdateNetworkSettings(ctx context.Context, p sandbox.NetworkPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) {
		return c.UpdateNetworkSettings(ctx, h.id, daytona.NetworkSettingsOf(p))
	})
	return err
}

func (daytonaHandle) PublishPort(context.Context, int, int) (sandbox.PublishedPort, error) {
	return sandbox.PublishedPort{}, errPreviewPorts
}

func (daytonaHandle) UnpublishPort(context.Context, int) error {
	return errPreviewPorts
}

// errPreviewPorts is why ports publish fails on the daytona engine.
var errPreviewPorts = fmt.Errorf("%w: a Daytona sandbox's ports are reached through its preview URLs (https://PORT-ID.<proxy>), not published on this host", sandbox.ErrUnsupported)

// CreateSnapshot builds the snapshot name on the control plane from an
// image reference, a Dockerfile or a base image with commands, its build
// logs written to logs as they come. A sandbox's root (src.Sandbox) is
// refused: Daytona's snapshots are built images.
func (daytonaEngine) CreateSnapshot(ctx context.Context, _, name string, src cli.SnapshotSource, logs io.Writer) (*cli.Snapshot, error) {
	var img daytona.Image
	switch {
	case src.Sandbox != "":
		return nil, fmt.Errorf("%w: the daytona engine builds snapshots of images: use --image REF, --dockerfile FILE or --from-image BASE --run CMD", sandbox.ErrUnsupported)
	case src.Image != "":
		img = daytona.BaseImage(src.Image)
	case src.Dockerfile != "":
		img = daytona.ImageFromDockerfile(src.Dockerfile)
	default:
		img = daytona.BaseImage(src.BaseImage).RunCommands(src.Run...)
	}
	return withClient(func(c *daytona.Client) (*cli.Snapshot, error) {
		fmt.Fprintf(logs, "Creating snapshot %s on %s…\n", name, c.APIURL())
		snap, err := c.BuildSnapshot(ctx, name, img, sandbox.Resources{CPUCores: float64(src.CPU), MemoryMiB: int64(src.Memory) << 10, DiskMiB: int64(src.Disk) << 10}, logs)
		if err != nil {
			return nil, err
		}
		out := daytonaSnapshot(snap)
		return &out, nil
	})
}

func (daytonaEngine) Snapshots(ctx context.Context, _ string) ([]cli.Snapshot, error) {
	return withClient(func(c *daytona.Client) ([]cli.Snapshot, error) {
		var out []cli.Snapshot
		for page := 1; ; page++ {
			p, err := c.ListSnapshots(ctx, "", page, 200)
			if err != nil {
				return nil, err
			}
			for i := range p.Items {
				out = append(out, daytonaSnapshot(&p.Items[i]))
			}
			if page >= p.TotalPages || len(p.Items) == 0 {
				return out, nil
			}
		}
	})
}

// daytonaSnapshot describes the Daytona snapshot s.
func daytonaSnapshot(s *daytona.Snapshot) cli.Snapshot {
	src := s.ImageName
	if src == "" && s.BuildInfo != nil {
		src = "dockerfile"
	}
	created, _ := time.Parse(time.RFC3339Nano, s.CreatedAt)
	return cli.Snapshot{Name: s.Name, ID: s.ID, State: string(s.State), Source: src, Reason: s.ErrorReason,
		Size: int64(s.Size * 1e9), Created: created}
}

func (daytonaEngine) RemoveSnapshot(ctx context.Context, _, name string) error {
	_, err := withClient(func(c *daytona.Client) (struct{}, error) { return struct{}{}, c.DeleteSnapshot(ctx, name) })
	return err
}

// Both engines have snapshots.
var (
	_ cli.SnapshotEngine = localEngine{}
	_ cli.SnapshotEngine = daytonaEngine{}
)
