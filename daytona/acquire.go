package daytona

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// driver is the sandbox.Driver of a Sandbox: find or create, stop, delete.
type driver struct{ s *Sandbox }

// stableWait bounds how long a start waits out a transitional state
// (Mastra: 120 s), and cleanupWait how long a dead sandbox's deletion is
// waited for before a new one of the same name is created.
const (
	stableWait  = 2 * time.Minute
	cleanupWait = time.Minute
)

// deadStates are the states of a sandbox that will not run again: it is
// deleted and created anew.
func deadState(st SandboxState) bool {
	return st == StateDestroyed || st == StateDestroying || st == StateError || st == StateBuildFailed
}

// Acquire finds the sandbox by its Daytona id (after a stop in this
// process) or its name and connects to it, starting it when stopped or
// archived and waiting out a transitional state; it creates the sandbox
// when there is none, or when the one found is dead (destroyed, error,
// build_failed: it is deleted first). Any other lookup error fails without
// creating anything.
func (d driver) Acquire(ctx context.Context) (sandbox.Outcome, error) {
	s := d.s
	key := s.lookupKey()
	sb, err := s.api.GetSandbox(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return "", fmt.Errorf("daytona: looking up sandbox %s: %w", key, err)
	case deadState(sb.State):
		d.cleanup(ctx, sb)
	default:
		if sb, err = d.wake(ctx, sb); err != nil {
			return "", err
		}
		return sandbox.OutcomeConnected, s.attach(ctx, sb)
	}
	s.mu.Lock()
	o := s.opts // UpdateNetworkSettings changes it
	s.mu.Unlock()
	req, dropped := o.createRequest(s.api.Target())
	if dropped {
		s.opts.Logf("daytona: %s", resourcesWarning)
	}
	sb, err = s.api.CreateAndWait(ctx, req, CreateOptions{BuildLogs: s.opts.BuildLogs})
	if err != nil {
		return "", fmt.Errorf("daytona: creating sandbox %s: %w", s.opts.Name, err)
	}
	return sandbox.OutcomeCreated, s.attach(ctx, sb)
}

// cleanup deletes the dead sandbox sb (best effort) and waits for it to
// be gone, so that its name is free again.
func (d driver) cleanup(ctx context.Context, sb *SandboxDTO) {
	ctx, cancel := context.WithTimeout(ctx, cleanupWait)
	defer cancel()
	if sb.State != StateDestroying && sb.State != StateDestroyed {
		if _, err := d.s.api.DeleteSandbox(ctx, sb.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return
		}
	}
	_, _ = d.s.api.WaitForState(ctx, sb.ID, StateDestroyed)
}

// wake brings the found sandbox sb to started: it waits out a
// transitional state, then starts it unless it runs, retrying while the
// server reports a state change in progress, until stableWait.
func (d driver) wake(ctx context.Context, sb *SandboxDTO) (*SandboxDTO, error) {
	api := d.s.api
	ctx, cancel := context.WithTimeout(ctx, stableWait)
	defer cancel()
	id := sb.ID
	for {
		if sb.State == StateStarted {
			return sb, nil
		}
		var next *SandboxDTO
		var err error
		if sb.State.Transitional() {
			next, err = api.WaitForState(ctx, id, StateStarted, StateStopped, StateArchived, StatePaused)
		} else {
			next, err = api.StartAndWait(ctx, id)
		}
		switch {
		case err == nil:
			sb = next
		case errors.Is(err, ErrConflict) && ctx.Err() == nil:
			// A state change in progress: look again.
			if err := sleep(ctx, pollFirst); err != nil {
				return nil, err
			}
			if sb, err = api.GetSandbox(ctx, id); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("daytona: starting sandbox %s: %w", d.s.opts.Name, err)
		}
	}
}

// Release stops the sandbox, keeping its files: the attached one, else
// the one found by id or name, if it runs. A sandbox already gone is no
// error.
func (d driver) Release(ctx context.Context) error {
	s := d.s
	id := s.RemoteID()
	if s.attached() == nil {
		sb, err := d.find(ctx)
		if err != nil || sb == nil || sb.State != StateStarted {
			return err
		}
		id = sb.ID
	}
	s.detach()
	if _, err := s.api.StopAndWait(ctx, id, false); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("daytona: stopping sandbox %s: %w", s.opts.Name, err)
	}
	return nil
}

// Teardown deletes the sandbox: the attached one, else the one found by
// id or name. A sandbox already gone counts as deleted; other failures
// are returned and the call can be retried.
func (d driver) Teardown(ctx context.Context) error {
	s := d.s
	id := s.RemoteID()
	if s.attached() == nil {
		sb, err := d.find(ctx)
		if err != nil || sb == nil {
			return err
		}
		id = sb.ID
	}
	if _, err := s.api.DeleteSandbox(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("daytona: deleting sandbox %s: %w", s.opts.Name, err)
	}
	s.detach()
	s.mu.Lock()
	s.remoteID = ""
	s.mu.Unlock()
	return nil
}

// find looks the sandbox up by its Daytona id or name without starting
// it; nil when there is none.
func (d driver) find(ctx context.Context) (*SandboxDTO, error) {
	sb, err := d.s.api.GetSandbox(ctx, d.s.lookupKey())
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return sb, err
}
