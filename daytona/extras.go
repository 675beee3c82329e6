package daytona

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// CloneOptions tune Clone.
type CloneOptions struct {
	// ID is the clone's logical id (and Daytona name). Default: a new one.
	ID string
	// Env replaces the template's environment overlay when not nil.
	Env map[string]string
	// IdleTimeout, when set, is the clone's AutoStopInterval.
	IdleTimeout time.Duration
}

// Clone returns a new pending sandbox configured as s was (network
// policy, image or snapshot, resources, volumes, labels, control-plane
// client included) but for its id and name, as Mastra's clone does. It
// makes no request.
func (s *Sandbox) Clone(o CloneOptions) (*Sandbox, error) {
	s.mu.Lock()
	opts := s.opts
	s.mu.Unlock()
	opts.ID, opts.Name = o.ID, ""
	opts.Client = s.api
	opts.Env = maps.Clone(s.Lifecycle.Env())
	if o.Env != nil {
		opts.Env = maps.Clone(o.Env)
	}
	if o.IdleTimeout != 0 {
		opts.AutoStopInterval = o.IdleTimeout
	}
	opts.Labels = maps.Clone(s.opts.Labels)
	return New(opts)
}

// UpdateNetworkSettings changes the running sandbox's network policy to
// p as a whole (its zero value is the default), live, after validating
// it as New does. Later clones and Instructions follow it.
func (s *Sandbox) UpdateNetworkSettings(ctx context.Context, p sandbox.NetworkPolicy) error {
	s.mu.Lock()
	check := s.opts
	s.mu.Unlock()
	check.Network = p
	checked, err := check.normalize()
	if err != nil {
		return err
	}
	id := s.RemoteID()
	if id == "" {
		return fmt.Errorf("daytona: UpdateNetworkSettings: %w", &sandbox.NotReadyError{ID: s.opts.ID})
	}
	sb, err := s.api.UpdateNetworkSettings(ctx, id, NetworkSettingsOf(checked.Network))
	if err != nil {
		return err
	}
	got, err := sandbox.ParseNetworkPolicy(sb.NetworkBlockAll, sb.NetworkAllowList, sb.DomainAllowList)
	if err != nil {
		got = checked.Network // the server's answer is the policy sent, in its own words
	}
	s.mu.Lock()
	s.opts.Network = got
	s.mu.Unlock()
	return nil
}

// PortURL returns the preview URL of the sandbox's port and the token to
// send with it (X-Daytona-Preview-Token; "" for a public sandbox). It
// looks the sandbox up by id or name and does not start it.
func (s *Sandbox) PortURL(ctx context.Context, port int) (url, token string, err error) {
	p, err := s.api.PreviewURL(ctx, s.lookupKey(), port)
	if err != nil {
		return "", "", err
	}
	return p.URL, p.Token, nil
}

// SignedPortURL returns a preview URL of the sandbox's port that carries
// its own token, valid for expires (0: the server's default).
func (s *Sandbox) SignedPortURL(ctx context.Context, port int, expires time.Duration) (string, error) {
	p, err := s.api.SignedPreviewURL(ctx, s.lookupKey(), port, int(expires/time.Second))
	if err != nil {
		return "", err
	}
	return p.URL, nil
}

// lookupKey returns what the control plane knows the sandbox by: its
// Daytona id once known, else its name.
func (s *Sandbox) lookupKey() string {
	if id := s.RemoteID(); id != "" {
		return id
	}
	return s.opts.Name
}
