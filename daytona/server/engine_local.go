package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// localEngine runs the server's sandboxes with package local, in one
// state dir, under the server's sandbox ids.
type localEngine struct {
	stateDir string
	pool     *local.Pool // nil: none (Options.PoolSize)
}

func (e localEngine) create(id string, sp spec) (func(context.Context) (sizes, error), error) {
	vols := make([]local.Volume, len(sp.volumes))
	for i, v := range sp.volumes {
		vols[i] = local.Volume{Name: v.VolumeID, MountPath: v.MountPath}
	}
	sb, err := local.New(local.Options{
		ID:       id,
		StateDir: e.stateDir,
		Pool:     e.pool,
		Config: local.Config{
			Name:     sp.name,
			User:     sp.user,
			Language: sp.language,
			Image:    sp.image,
			// A test knob (knobs.go).
			DaytonaToolbox: sp.daytonaToolbox,
			// The server's timers stop and delete the sandbox, so that
			// the intervals can change while it runs.
			AutoStopInterval: -1,
			Volumes:          vols,
			Network:          sp.network,
			// FUSE mounts (s3fs, gcsfuse) work as in Daytona's sandboxes.
			Confinement: local.Confinement{AllowFUSE: local.FUSEAvailable()},
			Resources:   sp.resources,
			Secrets:     sp.secrets,
		},
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (sizes, error) {
		defer sb.Close(context.WithoutCancel(ctx))
		if _, err := sb.Start(ctx); err != nil {
			return sizes{}, err
		}
		if err := applyEnv(ctx, sb.Client(), sp.env); err != nil {
			return sizes{}, err
		}
		info, err := sb.Info(ctx)
		if err != nil {
			return sizes{}, err
		}
		var sz sizes
		if l := info.Limits; l != nil {
			sz = sizes{cpu: l.CPUCores, memoryGiB: float64(l.MemoryMB) / 1024, diskGiB: float64(l.DiskMB) / 1024}
		}
		return sz, nil
	}, nil
}

// applyEnv gives the commands of a sandbox that just started the
// environment it was created with: the local engine keeps no environment
// of its own across a stop.
func applyEnv(ctx context.Context, c *toolbox.Client, env map[string]string) error {
	if len(env) == 0 {
		return nil
	}
	if err := c.UpdateEnv(ctx, toolbox.UpdateEnvRequest{Set: env}); err != nil {
		return fmt.Errorf("setting the sandbox's environment: %w", err)
	}
	return nil
}

func (e localEngine) start(ctx context.Context, id string, env map[string]string) error {
	sb, err := local.New(local.Options{ID: id, StateDir: e.stateDir})
	if err != nil {
		return err
	}
	defer sb.Close(context.WithoutCancel(ctx))
	if _, err := sb.Start(ctx); err != nil {
		return err
	}
	return applyEnv(ctx, sb.Client(), env)
}

func (e localEngine) stop(ctx context.Context, id string) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.Stop(ctx)
}

// remove destroys sandbox id whatever state its folder is in: also one
// whose create a crash interrupted, which has no metadata (local.Remove).
func (e localEngine) remove(ctx context.Context, id string) error {
	return local.Remove(ctx, e.stateDir, id)
}

func (e localEngine) status(ctx context.Context, id string) (engineStatus, error) {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return engineStatus{}, err
	}
	info, err := sb.Info(ctx)
	if err != nil {
		return engineStatus{}, err
	}
	return engineStatus{running: info.Status == sandbox.StatusRunning, paused: info.Status == sandbox.StatusPaused, lastUsed: info.LastUsedAt}, nil
}

func (e localEngine) setNetwork(ctx context.Context, id string, n sandbox.NetworkPolicy) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.UpdateNetworkSettings(ctx, n)
}

func (e localEngine) dialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return nil, err
	}
	return sb.DialPort(ctx, port)
}

// removeVolume deletes the named volume and its files.
func (e localEngine) removeVolume(ctx context.Context, name string) error {
	return local.RemoveVolume(ctx, e.stateDir, name)
}

// dial connects to the toolbox server of sandbox id.
func (e localEngine) dial(ctx context.Context, id string) (net.Conn, error) {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return nil, err
	}
	return sb.DialToolbox(ctx)
}

// errNotFound reports whether err says that the engine has no such
// sandbox.
func errNotFound(err error) bool { return errors.Is(err, sandbox.ErrNotFound) }

// hasImage reports whether the local engine's image store has ref.
func (e localEngine) hasImage(ctx context.Context, ref string) (bool, error) {
	_, err := local.LookupImage(ctx, e.stateDir, ref)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
