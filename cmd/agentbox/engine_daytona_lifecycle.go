package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/agentbox-dev/agentbox/daytona"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The daytona handle's fork, pause and resume (issue 27), each a
// control-plane call, for the CLI's sandbox fork, pause and resume.

var (
	_ sandbox.Forker = daytonaHandle{}
	_ sandbox.Pauser = daytonaHandle{}
)

// Fork forks the sandbox into the sandbox opts.ID (its Daytona name;
// empty lets the control plane choose), labelled opts.Labels (nil: the
// source's), and returns a handle of the fork once it is started or
// stopped as the source is: a daytona.Sandbox that connects on first use.
func (h daytonaHandle) Fork(ctx context.Context, opts sandbox.ForkOptions) (sandbox.Sandbox, error) {
	name := opts.ID
	if opts.Name != "" {
		name = opts.Name
	}
	got, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) {
		var labels map[string]string
		if opts.Labels != nil || name != "" {
			src, err := c.GetSandbox(ctx, h.id)
			if err != nil {
				return nil, err
			}
			labels = maps.Clone(src.Labels)
			if opts.Labels != nil {
				labels = maps.Clone(opts.Labels)
			}
			if labels == nil {
				labels = map[string]string{}
			}
			labels[daytona.LabelSandboxID] = name
		}
		return c.ForkAndWait(ctx, h.id, name, labels)
	})
	if err != nil {
		return nil, fmt.Errorf("fork of sandbox %s: %w", h.id, err)
	}
	return daytona.New(daytona.Options{ID: got.Name})
}

// Pause pauses the started sandbox, keeping its memory; a stopped one is
// an error matching sandbox.ErrInvalidState.
func (h daytonaHandle) Pause(ctx context.Context) error {
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) { return c.PauseAndWait(ctx, h.id) })
	return err
}

// Resume resumes the paused sandbox (a running one is left so); a
// stopped one is an error matching sandbox.ErrInvalidState.
func (h daytonaHandle) Resume(ctx context.Context) error {
	_, err := withClient(func(c *daytona.Client) (*daytona.SandboxDTO, error) {
		sb, err := c.GetSandbox(ctx, h.id)
		switch {
		case err != nil:
			return nil, err
		case sb.State == daytona.StateStarted:
			return sb, nil
		case sb.State != daytona.StatePaused && sb.State != daytona.StateResuming:
			return nil, fmt.Errorf("resume of sandbox %s: %w: it is %s", h.id, sandbox.ErrInvalidState, sb.State)
		}
		return c.StartAndWait(ctx, h.id)
	})
	return err
}
