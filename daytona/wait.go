package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/errbody"
)

// The polling cadence of WaitForState, as Daytona's SDKs poll: every
// pollFirst for pollFast, then each pause pollGrowth times the last, up
// to pollMax.
const (
	pollFirst  = 100 * time.Millisecond
	pollFast   = 5 * time.Second
	pollGrowth = 1.1
	pollMax    = time.Second
)

// FailedStateError is the error of a wait that ended with the sandbox in a
// failed state (error, build_failed) instead of the one waited for.
type FailedStateError struct {
	ID     string
	State  SandboxState
	Reason string // the sandbox's errorReason
}

func (e *FailedStateError) Error() string {
	msg := fmt.Sprintf("daytona: sandbox %s is in state %s", e.ID, e.State)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// WaitForState polls sandbox id until its state is one of targets and
// returns it then. A failed state (error, build_failed) not among targets
// ends the wait with a *FailedStateError. When targets holds StateDestroyed, a
// 404 counts as destroyed (the sandbox is returned with that state) and
// other errors are retried until ctx ends.
func (c *Client) WaitForState(ctx context.Context, id string, targets ...SandboxState) (*SandboxDTO, error) {
	gone := slices.Contains(targets, StateDestroyed)
	begin := time.Now()
	pause := pollFirst
	for {
		sb, err := c.GetSandbox(ctx, id)
		switch {
		case err == nil && slices.Contains(targets, sb.State):
			return sb, nil
		case err == nil && sb.State.Failed():
			return sb, &FailedStateError{ID: id, State: sb.State, Reason: sb.ErrorReason}
		case gone && errors.Is(err, ErrNotFound):
			return &SandboxDTO{ID: id, State: StateDestroyed}, nil
		case err != nil && !gone:
			return nil, err
		}
		if err := sleep(ctx, pause); err != nil {
			last := "unknown"
			if sb != nil && sb.State != "" {
				last = string(sb.State)
			}
			return nil, fmt.Errorf("daytona: waiting for sandbox %s to be %v (last seen %s): %w", id, targets, last, err)
		}
		if time.Since(begin) >= pollFast {
			pause = min(time.Duration(float64(pause)*pollGrowth), pollMax)
		}
	}
}

// CreateOptions tune CreateAndWait.
type CreateOptions struct {
	// BuildLogs, when set, receives the image's build logs of a create
	// with BuildInfo, as they come.
	BuildLogs io.Writer
}

// CreateAndWait creates a sandbox and waits until it is started, streaming
// its build logs to opts.BuildLogs. A sandbox that fails to build or start
// is returned with a *FailedStateError; ctx bounds the whole.
func (c *Client) CreateAndWait(ctx context.Context, req CreateSandbox, opts CreateOptions) (*SandboxDTO, error) {
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	if sb.State.Failed() {
		return sb, &FailedStateError{ID: sb.ID, State: sb.State, Reason: sb.ErrorReason}
	}
	if opts.BuildLogs != nil && req.BuildInfo != nil {
		if err := c.followBuildLogs(ctx, sb, opts.BuildLogs); err != nil {
			return sb, err
		}
	}
	if sb.State == StateStarted {
		return sb, nil
	}
	started, err := c.WaitForState(ctx, sb.ID, StateStarted)
	if err != nil {
		if started != nil {
			return started, err
		}
		return sb, err
	}
	return started, nil
}

// followBuildLogs waits until sandbox sb's build has begun and copies its
// build logs to w until they end.
func (c *Client) followBuildLogs(ctx context.Context, sb *SandboxDTO, w io.Writer) error {
	if sb.State == StatePendingBuild {
		if _, err := c.WaitForState(ctx, sb.ID, StateBuildingSnapshot, StatePullingSnapshot, StateStarting, StateStarted); err != nil {
			return err
		}
	}
	var u urlAnswer
	err := c.do(ctx, call{method: "GET", path: "/sandbox/" + escape(sb.ID) + "/build-logs-url", idempotent: true}, &u)
	if err != nil {
		if errors.Is(err, ErrNotFound) || isNotImplemented(err) {
			return nil // no build logs to follow
		}
		return err
	}
	return c.streamLogs(ctx, u.URL, w)
}

// streamLogs copies the plain-text log stream at u (followed) to w.
func (c *Client) streamLogs(ctx context.Context, u string, w io.Writer) error {
	resp, err := c.send(ctx, "GET", appendQuery(u, "follow=true"), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		body := errbody.Read(resp.Body)
		return parseAPIError("GET", "build logs", resp, body)
	}
	if _, err := io.Copy(w, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("daytona: reading build logs: %w", err)
	}
	return nil
}

// appendQuery adds q to the URL u.
func appendQuery(u, q string) string {
	if strings.Contains(u, "?") {
		return u + "&" + q
	}
	return u + "?" + q
}

// isNotImplemented reports whether err is a 501 answer.
func isNotImplemented(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotImplemented
}

// StartAndWait starts a sandbox and waits until it is started.
func (c *Client) StartAndWait(ctx context.Context, idOrName string) (*SandboxDTO, error) {
	sb, err := c.StartSandbox(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	if sb.State == StateStarted {
		return sb, nil
	}
	return c.WaitForState(ctx, sb.ID, StateStarted)
}

// StopAndWait stops a sandbox and waits until it is stopped (or
// destroyed: an ephemeral sandbox is deleted when it stops).
func (c *Client) StopAndWait(ctx context.Context, idOrName string, force bool) (*SandboxDTO, error) {
	sb, err := c.StopSandbox(ctx, idOrName, force)
	if err != nil {
		return nil, err
	}
	return c.WaitForState(ctx, sb.ID, StateStopped, StateDestroyed)
}

// DeleteAndWait deletes a sandbox and waits until it is gone.
func (c *Client) DeleteAndWait(ctx context.Context, idOrName string) error {
	sb, err := c.DeleteSandbox(ctx, idOrName)
	if err != nil {
		return err
	}
	_, err = c.WaitForState(ctx, sb.ID, StateDestroyed)
	return err
}
