package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The fake engine's fork, pause, resume and snapshot. A paused fake
// sandbox's toolbox refuses connections (dial), so that a request that
// reaches it proves that it was resumed first.

func (e *fakeEngine) fork(srcID, newID, name string, env map[string]string) (func(context.Context) error, error) {
	e.mu.Lock()
	_, err := e.box(srcID)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := e.enter(ctx, "fork"); err != nil {
			return err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		src, err := e.box(srcID)
		if err != nil {
			return err
		}
		e.n++
		n := strconv.Itoa(e.n)
		sp := src.spec
		sp.name = name
		b := &fakeBox{spec: sp, work: filepath.Join(e.dir, n), sock: filepath.Join(e.dir, n+".sock"), network: src.network, env: src.env}
		if err := os.CopyFS(b.work, os.DirFS(src.work)); err != nil {
			return fmt.Errorf("fake fork: %w", err)
		}
		if src.srv != nil {
			if err := b.run(src.env); err != nil {
				return err
			}
		}
		e.boxes[newID] = b
		return nil
	}, nil
}

func (e *fakeEngine) pause(ctx context.Context, id string) error {
	return e.op(ctx, "pause", id, func(b *fakeBox) error {
		if b.srv == nil {
			return fmt.Errorf("fake sandbox %s is stopped: %w", id, sandbox.ErrInvalidState)
		}
		b.paused = true
		return nil
	})
}

func (e *fakeEngine) resume(ctx context.Context, id string) error {
	return e.op(ctx, "resume", id, func(b *fakeBox) error {
		b.paused = false
		return nil
	})
}

// snapshot: the fake engine has no image store.
func (e *fakeEngine) snapshot(string, string) (func(context.Context) error, error) {
	return nil, errEngineCannot("snapshot sandboxes")
}

// pausedBox reports whether the engine's sandbox id is paused.
func (e *fakeEngine) pausedBox(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.box(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.paused
}

// snapshot of the image fake: an image named storeName, as a build's.
func (f *imageFake) snapshot(id, storeName string) (func(context.Context) error, error) {
	f.fakeEngine.mu.Lock()
	_, err := f.box(id)
	f.fakeEngine.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := f.enter(ctx, "snapshot"); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.names[storeName] = true
		return nil
	}, nil
}
