package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// lifecycleEngine is the part of an engine that forks, pauses, resumes
// and snapshots sandboxes. Each method's prepare step refuses, before
// anything changes, what the engine cannot do (an error matching
// sandbox.ErrUnsupported, answered 400 by the server): the returned
// function then does the work.
type lifecycleEngine interface {
	// fork checks that sandbox srcID can be forked and returns the
	// function that makes sandbox newID (named name) with a copy of its
	// files and configuration, running or stopped as the source is; the
	// source keeps running.
	fork(srcID, newID, name string, env map[string]string) (func(context.Context) error, error)
	// pause freezes every process of the running sandbox id with its
	// memory kept; resume thaws them.
	pause(ctx context.Context, id string) error
	resume(ctx context.Context, id string) error
	// snapshot checks that sandbox id can be snapshotted and returns the
	// function that makes the image storeName of its files (of a running
	// sandbox too), for sandboxes' creates to use.
	snapshot(id, storeName string) (func(context.Context) error, error)
}

// errEngineCannot returns the error of an engine that cannot do what.
func errEngineCannot(what string) error {
	return fmt.Errorf("%w: this agentbox serve's engine cannot %s yet on this machine", sandbox.ErrUnsupported, what)
}

// fork forks with package local; the fork's commands get env, which the
// local engine does not keep across a stop.
func (e localEngine) fork(srcID, newID, name string, env map[string]string) (func(context.Context) error, error) {
	if err := local.ValidateID(newID); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		sb, err := local.Open(ctx, e.stateDir, srcID)
		if err != nil {
			return err
		}
		f, err := sb.Fork(ctx, sandbox.ForkOptions{ID: newID, Name: name})
		if err != nil {
			return err
		}
		defer f.Close(context.WithoutCancel(ctx))
		if f.Status() != sandbox.StatusRunning {
			return nil
		}
		return applyEnv(ctx, f.Client(), env)
	}, nil
}

func (e localEngine) pause(ctx context.Context, id string) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.Pause(ctx)
}

func (e localEngine) resume(ctx context.Context, id string) error {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return err
	}
	return sb.Resume(ctx)
}

// snapshot makes the image under a name package local accepts, then
// names it storeName and drops the first name.
func (e localEngine) snapshot(id, storeName string) (func(context.Context) error, error) {
	if err := local.ValidateID(id); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		sb, err := local.Open(ctx, e.stateDir, id)
		if err != nil {
			return err
		}
		tmp := "serve-snapshot-" + newToken()[:16]
		img, err := sb.CreateSnapshot(ctx, tmp)
		if err != nil {
			return err
		}
		st, err := local.OpenImageStore(e.stateDir)
		if err != nil {
			return err
		}
		named := *img
		named.Names = []string{storeName}
		_, err = st.Save(ctx, &named)
		if uerr := st.Untag(context.WithoutCancel(ctx), tmp); uerr != nil && err == nil {
			err = uerr
		}
		if err != nil {
			return fmt.Errorf("naming the snapshot: %w", err)
		}
		return nil
	}, nil
}

// errUnsupported reports whether err says that the engine cannot do
// what was asked.
func errUnsupported(err error) bool { return errors.Is(err, sandbox.ErrUnsupported) }
