package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// localEngine is the cli.Engine of the local engine.
type localEngine struct{}

func (localEngine) DefaultStateDir() string { return local.DefaultStateDir() }

func (localEngine) Open(_ context.Context, o cli.OpenOptions) (cli.Box, error) {
	s, err := local.New(local.Options{ID: o.ID, StateDir: o.StateDir, Config: local.Config{NetworkBlockAll: o.NetworkBlockAll}})
	if err != nil {
		return nil, err
	}
	return &localBox{Sandbox: s}, nil
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

// localBox is an opened local sandbox.
type localBox struct {
	*local.Sandbox
}

func (b *localBox) Sessions() (cli.Sessions, error) {
	c := b.Client()
	if c == nil {
		return nil, fmt.Errorf("sandbox %q has no toolbox connection: %w", b.ID(), sandbox.ErrNotReady)
	}
	return clientSessions{c}, nil
}

// Close releases this process's connection to the sandbox; the sandbox
// keeps running.
func (b *localBox) Close(ctx context.Context) error {
	switch c := any(b.Sandbox).(type) {
	case interface{ Close(context.Context) error }:
		return c.Close(ctx)
	case interface{ Close() error }:
		return c.Close()
	}
	return nil
}

// clientSessions adapts a toolbox client to cli.Sessions.
type clientSessions struct {
	*toolbox.Client
}

func (c clientSessions) ExecuteAsync(ctx context.Context, sessionID, command string) (string, error) {
	r, err := c.SessionExecute(ctx, sessionID, toolbox.SessionExecuteRequest{Command: command, RunAsync: true})
	if err != nil {
		return "", err
	}
	if r.CmdID == "" {
		return "", errors.New("the toolbox server returned no command id")
	}
	return r.CmdID, nil
}
