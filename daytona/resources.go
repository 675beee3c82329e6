package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Snapshots and volumes.

// GetSnapshot returns the snapshot with id or name idOrName.
func (c *Client) GetSnapshot(ctx context.Context, idOrName string) (*Snapshot, error) {
	var out Snapshot
	return &out, c.do(ctx, call{method: "GET", path: "/snapshots/" + escape(idOrName), idempotent: true}, &out)
}

// ListSnapshots returns page page (from 1) of the snapshots whose name
// holds name ("" for all), limit to a page (0: the server's default).
func (c *Client) ListSnapshots(ctx context.Context, name string, page, limit int) (*SnapshotPage, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out SnapshotPage
	return &out, c.do(ctx, call{method: "GET", path: "/snapshots", query: q, idempotent: true}, &out)
}

// CreateSnapshot creates a snapshot from an image or a Dockerfile and
// returns it, usually building or pending.
func (c *Client) CreateSnapshot(ctx context.Context, req CreateSnapshot) (*Snapshot, error) {
	var out Snapshot
	return &out, c.do(ctx, call{method: "POST", path: "/snapshots", body: req}, &out)
}

// SnapshotBuildLogs copies the build logs of snapshot id to w, following
// them until the build ends.
func (c *Client) SnapshotBuildLogs(ctx context.Context, id string, w io.Writer) error {
	var u urlAnswer
	if err := c.do(ctx, call{method: "GET", path: "/snapshots/" + escape(id) + "/build-logs-url", idempotent: true}, &u); err != nil {
		return err
	}
	return c.streamLogs(ctx, u.URL, w)
}

// snapshotPoll is how often WaitForSnapshot looks, as the SDKs do.
const snapshotPoll = time.Second

// SnapshotFailedError is the error of a snapshot whose build (or pull)
// failed: it ended in state error or build_failed.
type SnapshotFailedError struct {
	// Name is the snapshot's name.
	Name string
	// State is the state it ended in.
	State SnapshotState
	// Reason is its errorReason, as Daytona says it.
	Reason string
}

func (e *SnapshotFailedError) Error() string {
	msg := fmt.Sprintf("daytona: snapshot %s is %s", e.Name, e.State)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// WaitForSnapshot polls snapshot idOrName until it is active, and fails
// with a *SnapshotFailedError when it ends in error or build_failed.
func (c *Client) WaitForSnapshot(ctx context.Context, idOrName string) (*Snapshot, error) {
	for {
		s, err := c.GetSnapshot(ctx, idOrName)
		if err != nil {
			return nil, err
		}
		switch s.State {
		case SnapshotActive:
			return s, nil
		case SnapshotError, SnapshotBuildFailed:
			return s, &SnapshotFailedError{Name: s.Name, State: s.State, Reason: s.ErrorReason}
		}
		if err := sleep(ctx, snapshotPoll); err != nil {
			return nil, fmt.Errorf("daytona: waiting for snapshot %s (last %s): %w", idOrName, s.State, err)
		}
	}
}

// BuildSnapshot creates the snapshot name of image, sized by res (zero
// fields: Daytona's defaults), copies its build logs to logs (when not
// nil) as they come, and waits until it is active. An image that is only
// a base image is pulled (the snapshot's imageName), as Daytona's SDKs
// do with an image name; any other is built from its Dockerfile
// (buildInfo). A build that fails returns the snapshot with a
// *SnapshotFailedError carrying Daytona's reason; an invalid image or
// name fails before any request, matching sandbox.ErrInvalidArgument.
func (c *Client) BuildSnapshot(ctx context.Context, name string, image Image, res sandbox.Resources, logs io.Writer) (*Snapshot, error) {
	if err := image.Err(); err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsFunc(name, isSpaceOrControl) {
		return nil, fmt.Errorf("daytona: snapshot name %q: a snapshot needs a name without spaces: %w", name, sandbox.ErrInvalidArgument)
	}
	req := CreateSnapshot{Name: name}
	var err error
	if req.CPU, req.Memory, req.Disk, err = wireResources(res); err != nil {
		return nil, fmt.Errorf("daytona: snapshot %s: %w", name, err)
	}
	if ref := image.imageName(); ref != "" {
		req.ImageName = ref
	} else {
		req.BuildInfo = &CreateBuildInfo{DockerfileContent: image.Dockerfile()}
	}
	snap, err := c.CreateSnapshot(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("daytona: creating snapshot %s: %w", name, err)
	}
	if logs != nil {
		// The logs end with the build. A deployment that keeps none (404,
		// 501) or a stream cut short leaves the waiting to the polls.
		if err := c.SnapshotBuildLogs(ctx, snap.ID, logs); err != nil && ctx.Err() != nil {
			return snap, err
		}
	}
	return c.WaitForSnapshot(ctx, snap.ID)
}

// DeleteSnapshot deletes the snapshot with id or name idOrName.
func (c *Client) DeleteSnapshot(ctx context.Context, idOrName string) error {
	s, err := c.GetSnapshot(ctx, idOrName)
	if err != nil {
		return err
	}
	return c.do(ctx, call{method: "DELETE", path: "/snapshots/" + escape(s.ID), idempotent: true}, nil)
}

// CreateVolume creates a named volume.
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	var out Volume
	body := struct {
		Name string `json:"name"`
	}{name}
	return &out, c.do(ctx, call{method: "POST", path: "/volumes", body: body}, &out)
}

// GetVolume returns the volume with id id.
func (c *Client) GetVolume(ctx context.Context, id string) (*Volume, error) {
	var out Volume
	return &out, c.do(ctx, call{method: "GET", path: "/volumes/" + escape(id), idempotent: true}, &out)
}

// GetVolumeByName returns the volume named name.
func (c *Client) GetVolumeByName(ctx context.Context, name string) (*Volume, error) {
	var out Volume
	return &out, c.do(ctx, call{method: "GET", path: "/volumes/by-name/" + escape(name), idempotent: true}, &out)
}

// GetOrCreateVolume returns the volume named name, creating it when there
// is none, as the SDKs' get(name, create=true) does.
func (c *Client) GetOrCreateVolume(ctx context.Context, name string) (*Volume, error) {
	v, err := c.GetVolumeByName(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return c.CreateVolume(ctx, name)
	}
	return v, err
}

// ListVolumes returns every volume.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var out []Volume
	err := c.do(ctx, call{method: "GET", path: "/volumes", idempotent: true}, &out)
	return slices.Clip(out), err
}

// DeleteVolume deletes the volume with id id (409 while it is mounted).
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	return c.do(ctx, call{method: "DELETE", path: "/volumes/" + escape(id), idempotent: true}, nil)
}
