package daytona

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Fork, pause, resume and snapshots of a sandbox (issue 27), over
// Daytona's forkSandbox, pauseSandbox, startSandbox (which resumes a
// paused sandbox) and createSandboxSnapshot. Errors are the API's
// *APIError, wrapped with what was being done, as the package's other
// calls: 404 matches sandbox.ErrNotFound, 409 ErrConflict.

var (
	_ sandbox.Forker = (*Sandbox)(nil)
	_ sandbox.Pauser = (*Sandbox)(nil)
)

// ForkSandbox forks sandbox idOrName into a new sandbox named name (""
// lets the server choose) and returns it, usually creating.
func (c *Client) ForkSandbox(ctx context.Context, idOrName, name string) (*SandboxDTO, error) {
	var out SandboxDTO
	body := map[string]string{}
	if name != "" {
		body["name"] = name
	}
	return &out, c.do(ctx, call{method: "POST", path: "/sandbox/" + escape(idOrName) + "/fork", body: body}, &out)
}

// ListForks returns the sandboxes forked from sandbox idOrName.
func (c *Client) ListForks(ctx context.Context, idOrName string) ([]SandboxDTO, error) {
	var out []SandboxDTO
	return out, c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(idOrName) + "/forks", idempotent: true}, &out)
}

// PauseSandbox pauses a started sandbox, keeping its memory, and returns
// it (paused, or pausing).
func (c *Client) PauseSandbox(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/pause", nil, true)
}

// SetAutoPauseInterval sets a sandbox's auto-pause interval in minutes (0:
// never).
func (c *Client) SetAutoPauseInterval(ctx context.Context, idOrName string, minutes int) (*SandboxDTO, error) {
	return c.sandboxCall(ctx, "POST", idOrName, "/autopause/"+strconv.Itoa(minutes), nil, true)
}

// UpdateLastActivity tells the server that sandbox id is in use, which
// restarts its idle timers.
func (c *Client) UpdateLastActivity(ctx context.Context, id string) error {
	return c.do(ctx, call{method: "POST", path: "/sandbox/" + escape(id) + "/last-activity", idempotent: true}, nil)
}

// CreateSandboxSnapshot starts making the snapshot name of sandbox
// idOrName's files and returns the sandbox (snapshotting).
func (c *Client) CreateSandboxSnapshot(ctx context.Context, idOrName, name string) (*SandboxDTO, error) {
	var out SandboxDTO
	return &out, c.do(ctx, call{method: "POST", path: "/sandbox/" + escape(idOrName) + "/snapshot", body: map[string]any{"name": name}}, &out)
}

// ForkAndWait forks sandbox idOrName into the sandbox name ("" lets the
// server choose), labels it with labels when not nil, and waits until
// the fork is started or stopped (as the source was).
func (c *Client) ForkAndWait(ctx context.Context, idOrName, name string, labels map[string]string) (*SandboxDTO, error) {
	sb, err := c.ForkSandbox(ctx, idOrName, name)
	if err != nil {
		return nil, err
	}
	if labels != nil {
		if _, err := c.SetLabels(ctx, sb.ID, labels); err != nil {
			return nil, fmt.Errorf("labelling the fork %s: %w", sb.Name, err)
		}
	}
	return c.WaitForState(ctx, sb.ID, StateStarted, StateStopped)
}

// PauseAndWait pauses sandbox idOrName and waits until it is paused. A
// 409 (not started, or a change in flight) matches
// sandbox.ErrInvalidState too.
func (c *Client) PauseAndWait(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	sb, err := c.PauseSandbox(ctx, idOrName)
	if err == nil && sb.State != StatePaused {
		sb, err = c.WaitForState(ctx, sb.ID, StatePaused)
	}
	if errors.Is(err, ErrConflict) {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidState, err)
	}
	return sb, err
}

// remoteFor returns the Daytona id of the started sandbox, or a
// *sandbox.NotReadyError for what.
func (s *Sandbox) remoteFor(what string) (string, error) {
	id := s.RemoteID()
	if id == "" {
		return "", fmt.Errorf("daytona: %s: %w", what, &sandbox.NotReadyError{ID: s.opts.ID})
	}
	return id, nil
}

// Fork makes a new sandbox with a copy of this one's files and
// configuration (opts.ID its logical id and Daytona name, generated when
// empty; opts.Name its Daytona name when set; opts.Labels its labels, nil
// for this one's), started when this one is started, and returns it, a
// *Sandbox. This sandbox keeps running.
func (s *Sandbox) Fork(ctx context.Context, opts sandbox.ForkOptions) (sandbox.Sandbox, error) {
	id, err := s.remoteFor("Fork")
	if err != nil {
		return nil, err
	}
	child, err := s.Clone(CloneOptions{ID: opts.ID})
	if err != nil {
		return nil, err
	}
	if opts.Name != "" {
		child.opts.Name = opts.Name
	}
	labels := maps.Clone(s.opts.Labels)
	if opts.Labels != nil {
		labels = maps.Clone(opts.Labels)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelSandboxID] = child.opts.ID
	child.opts.Labels = labels
	got, err := s.api.ForkAndWait(ctx, id, child.opts.Name, labels)
	if err != nil {
		return nil, fmt.Errorf("daytona: forking sandbox %s: %w", s.opts.Name, err)
	}
	if got.State == StateStarted {
		if _, err := child.Start(ctx); err != nil {
			return nil, err
		}
	}
	return child, nil
}

// Pause freezes the started sandbox's processes, keeping their memory,
// and returns once it is paused; its Status is then sandbox.StatusPaused.
// Resume, Start or any command resumes it. Pause of a stopped sandbox
// fails with an error matching sandbox.ErrInvalidState, as does one the
// server refuses with 409.
func (s *Sandbox) Pause(ctx context.Context) error {
	id, err := s.remoteFor("Pause")
	if err == nil && s.Status() != sandbox.StatusRunning && s.Status() != sandbox.StatusPaused {
		err = fmt.Errorf("daytona: pausing sandbox %s: %w: it is %s", s.opts.Name, sandbox.ErrInvalidState, s.Status())
	}
	if err != nil {
		return err
	}
	if _, err := s.api.PauseAndWait(ctx, id); err != nil {
		return fmt.Errorf("daytona: pausing sandbox %s: %w", s.opts.Name, err)
	}
	s.SetStatus(sandbox.StatusPaused)
	return nil
}

// Resume resumes the paused sandbox and returns once it is started;
// Resume of a running sandbox does nothing, of a stopped one fails with
// an error matching sandbox.ErrInvalidState.
func (s *Sandbox) Resume(ctx context.Context) error {
	id, err := s.remoteFor("Resume")
	if err != nil {
		return err
	}
	switch s.Status() {
	case sandbox.StatusRunning:
		return nil
	case sandbox.StatusPaused:
	default:
		return fmt.Errorf("daytona: resuming sandbox %s: %w: it is %s", s.opts.Name, sandbox.ErrInvalidState, s.Status())
	}
	if _, err := s.api.StartAndWait(ctx, id); err != nil {
		return fmt.Errorf("daytona: resuming sandbox %s: %w", s.opts.Name, err)
	}
	s.SetStatus(sandbox.StatusRunning)
	return nil
}

// CreateSnapshot makes the snapshot name of the sandbox's files, running
// or stopped, which creates with Options.Snapshot use, and returns once it
// is active; the sandbox goes on as it was.
func (s *Sandbox) CreateSnapshot(ctx context.Context, name string) error {
	id, err := s.remoteFor("CreateSnapshot")
	if err != nil {
		return err
	}
	if _, err = s.api.CreateSandboxSnapshot(ctx, id, name); err == nil {
		_, err = s.api.WaitForState(ctx, id, StateStarted, StateStopped)
	}
	if err == nil {
		_, err = s.api.WaitForSnapshot(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("daytona: snapshot %s of sandbox %s: %w", name, s.opts.Name, err)
	}
	return nil
}
