package main

import (
	"context"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// localEngine is the cli.Engine of the local engine.
type localEngine struct{}

func (localEngine) DefaultStateDir() (string, error) { return local.DefaultStateDir() }

func (localEngine) DefaultStateDirHelp() string {
	return "$XDG_STATE_HOME/agentbox, else ~/.local/state/agentbox, else $XDG_RUNTIME_DIR/agentbox; never a shared folder such as /tmp"
}

func (localEngine) CheckStateDir(stateDir string) error { return local.CheckStateDir(stateDir) }

func (localEngine) Open(_ context.Context, o cli.OpenOptions) (cli.Box, error) {
	s, err := local.New(local.Options{ID: o.ID, StateDir: o.StateDir, Config: local.Config{NetworkBlockAll: o.NetworkBlockAll, Image: o.Image, Snapshot: o.Snapshot}})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (localEngine) List(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	return local.List(ctx, stateDir)
}

func (localEngine) Lookup(ctx context.Context, stateDir, id string) (*sandbox.Info, error) {
	return local.Lookup(ctx, stateDir, id)
}

func (localEngine) Remove(ctx context.Context, stateDir, id string) error {
	return local.Remove(ctx, stateDir, id)
}

func (localEngine) StopByID(ctx context.Context, stateDir, id string) error {
	return local.StopByID(ctx, stateDir, id)
}

func (localEngine) UpdateNetwork(ctx context.Context, stateDir, id string, s cli.NetworkSettings) error {
	return local.UpdateNetworkSettings(ctx, stateDir, id, local.NetworkSettings{BlockAll: s.BlockAll, AllowList: s.AllowList, DomainAllowList: s.DomainAllowList})
}

func (localEngine) PublishPort(ctx context.Context, stateDir, id string, hostPort, sandboxPort int) (sandbox.PublishedPort, error) {
	return local.PublishPort(ctx, stateDir, id, hostPort, sandboxPort)
}

func (localEngine) UnpublishPort(ctx context.Context, stateDir, id string, hostPort int) error {
	return local.UnpublishPort(ctx, stateDir, id, hostPort)
}

// newServer returns the server of agentbox serve: Daytona's control plane
// over the local engine.
func newServer(o cli.ServerOptions) (cli.Server, error) {
	return server.New(server.Options{StateDir: o.StateDir, APIKeys: o.APIKeys, Logf: o.Logf})
}

// serverKeys are the API keys of agentbox serve's records.
type serverKeys struct{}

func (serverKeys) CreateKey(ctx context.Context, stateDir, name, org string) (cli.ServerKey, string, error) {
	k, key, err := server.CreateAPIKey(ctx, stateDir, name, org)
	return cli.ServerKey(k), key, err
}

func (serverKeys) Keys(ctx context.Context, stateDir string) ([]cli.ServerKey, error) {
	keys, err := server.ListAPIKeys(ctx, stateDir)
	out := make([]cli.ServerKey, len(keys))
	for i, k := range keys {
		out[i] = cli.ServerKey(k)
	}
	return out, err
}

func (serverKeys) RemoveKey(ctx context.Context, stateDir, idOrName string) error {
	return server.RemoveAPIKey(ctx, stateDir, idOrName)
}

func (localEngine) CreateSnapshot(ctx context.Context, stateDir, id, name string) (*image.Image, error) {
	return local.CreateSnapshot(ctx, stateDir, id, name)
}

func (localEngine) Snapshots(ctx context.Context, stateDir string) ([]*image.Image, error) {
	return local.Snapshots(ctx, stateDir)
}

func (localEngine) RemoveSnapshot(ctx context.Context, stateDir, name string) error {
	return local.RemoveSnapshot(ctx, stateDir, name)
}
