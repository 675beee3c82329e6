package main

import (
	"context"
	"fmt"
	"io"
	"strings"

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
	secrets, err := localSecrets(o.StateDir, o.Secrets)
	if err != nil {
		return nil, err
	}
	s, err := local.New(local.Options{ID: o.ID, StateDir: o.StateDir, Config: local.Config{
		Network: o.Network, Image: o.Image, Snapshot: o.Snapshot, ReadOnlyRoot: o.ReadOnlyRoot,
		Resources:   o.Resources,
		Confinement: local.Confinement{AllowFUSE: o.AllowFUSE},
		Secrets:     secrets,
	}})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (localEngine) List(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	return local.List(ctx, stateDir)
}

// Find returns the handle of the existing sandbox id: a *local.Sandbox
// from local.Open, whose methods are the operations on it, as a
// local.Forkable (a sandbox.Forker).
func (localEngine) Find(ctx context.Context, stateDir, id string) (cli.Handle, error) {
	s, err := local.Open(ctx, stateDir, id)
	if err != nil {
		return nil, err
	}
	return local.Forkable{Sandbox: s}, nil
}

// newServer returns the server of agentbox serve: Daytona's control plane
// over the local engine.
func newServer(o cli.ServerOptions) (cli.Server, error) {
	return server.New(server.Options{StateDir: o.StateDir, APIKeys: o.APIKeys, Logf: o.Logf, PoolSize: o.Pool,
		PublishedImages: o.PublishedImages, AllowRegistries: o.AllowRegistries, BuildTimeout: o.BuildTimeout,
		MaxSandboxesPerOrg: o.MaxSandboxesPerOrg, MaxQueuedBuildsPerOrg: o.MaxQueuedBuildsPerOrg,
		MaxImageBytesPerOrg: int64(o.MaxImageGiBPerOrg) << 30, PreviewDomain: o.PreviewDomain})
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

// CreateSnapshot freezes a sandbox's root (src.Sandbox); the local engine
// makes images with agentbox image pull and build, not snapshots.
func (localEngine) CreateSnapshot(ctx context.Context, stateDir, name string, src cli.SnapshotSource, _ io.Writer) (*cli.Snapshot, error) {
	if src.Sandbox == "" {
		return nil, fmt.Errorf("%w: the local engine snapshots a sandbox (--from SANDBOX); make images with 'agentbox image pull' or 'agentbox image build' and create sandboxes with --image", sandbox.ErrUnsupported)
	}
	if src.CPU != 0 || src.Memory != 0 || src.Disk != 0 {
		return nil, fmt.Errorf("%w: a local snapshot has no sizes (--cpu, --memory, --disk): give them to the sandboxes", sandbox.ErrUnsupported)
	}
	sb, err := local.Open(ctx, stateDir, src.Sandbox)
	if err != nil {
		return nil, err
	}
	img, err := sb.CreateSnapshot(ctx, name)
	if err != nil {
		return nil, err
	}
	s := localSnapshot(img)
	return &s, nil
}

func (localEngine) Snapshots(ctx context.Context, stateDir string) ([]cli.Snapshot, error) {
	imgs, err := local.Snapshots(ctx, stateDir)
	if err != nil {
		return nil, err
	}
	out := make([]cli.Snapshot, len(imgs))
	for i, img := range imgs {
		out[i] = localSnapshot(img)
	}
	return out, nil
}

// localSnapshot describes the local snapshot img.
func localSnapshot(img *image.Image) cli.Snapshot {
	return cli.Snapshot{Name: strings.Join(img.Names, ","), ID: img.ID, State: "active", Source: img.Base, Size: img.Size, Created: img.Created}
}

func (localEngine) RemoveSnapshot(ctx context.Context, stateDir, name string) error {
	return local.RemoveSnapshot(ctx, stateDir, name)
}

// ListSummaries lists with local.ListSummaries: what 'sandbox ls' prints,
// at a fraction of List's cost.
func (localEngine) ListSummaries(ctx context.Context, stateDir string) ([]sandbox.Info, error) {
	return local.ListSummaries(ctx, stateDir)
}
