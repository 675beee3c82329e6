package main

import (
	"context"
	"fmt"

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
	s, err := daytona.New(daytona.Options{ID: o.ID, Image: o.Image, Snapshot: o.Snapshot, NetworkBlockAll: o.NetworkBlockAll})
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

func (daytonaEngine) Lookup(ctx context.Context, _, id string) (*sandbox.Info, error) {
	return withClient(func(c *daytona.Client) (*sandbox.Info, error) {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			return nil, err
		}
		return sb.Info(), nil
	})
}

func (daytonaEngine) Remove(ctx context.Context, _, id string) error {
	_, err := withClient(func(c *daytona.Client) (struct{}, error) { return struct{}{}, c.DeleteAndWait(ctx, id) })
	return err
}

func (daytonaEngine) StopByID(ctx context.Context, _, id string) error {
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) { return c.StopAndWait(ctx, id, false) })
	return err
}

func (daytonaEngine) UpdateNetwork(ctx context.Context, _, id string, s cli.NetworkSettings) error {
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) {
		return c.UpdateNetworkSettings(ctx, id, daytona.NetworkSettings{NetworkBlockAll: &s.BlockAll, NetworkAllowList: &s.AllowList, DomainAllowList: &s.DomainAllowList})
	})
	return err
}

func (daytonaEngine) PublishPort(context.Context, string, string, int, int) (sandbox.PublishedPort, error) {
	return sandbox.PublishedPort{}, errPreviewPorts
}

func (daytonaEngine) UnpublishPort(context.Context, string, string, int) error {
	return errPreviewPorts
}

// errPreviewPorts is why ports publish fails on the daytona engine.
var errPreviewPorts = fmt.Errorf("%w: a Daytona sandbox's ports are reached through its preview URLs (https://PORT-ID.<proxy>), not published on this host", sandbox.ErrUnsupported)
