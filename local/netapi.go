package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Changing the network of a sandbox: its policy (UpdateNetworkSettings)
// and its published ports (PublishPort, UnpublishPort). Both are recorded
// in meta.json (the policy as the sandbox's Config), so that a restart
// keeps them, and take effect at once on a running sandbox.

// UpdateNetworkSettings changes the network policy of the sandbox, as
// Daytona's updateNetworkSettings does, and records it in the sandbox's
// Config. On a running sandbox it takes effect at once, for new
// connections and existing ones: a connection the new policy refuses is
// cut (its next packet is answered with a TCP reset), and switching to
// NetworkBlocked removes the sandbox's interface. A sandbox that does
// not exist yet gets the policy when it is created. p replaces the
// policy as a whole: its zero value is the default (the public internet
// only). A sandbox created with Network.Mode NetworkHost cannot change.
//
// Commands started through this handle (or a handle made later) get the
// proxy variables of the Domains that the change adds; a command
// already running keeps its environment.
func (s *Sandbox) UpdateNetworkSettings(ctx context.Context, p sandbox.NetworkPolicy) error {
	err := updateNetworkSettings(ctx, s, p)
	if errors.Is(err, sandbox.ErrNotFound) {
		// Not created yet: the settings shape its creation.
		s.mu.Lock()
		defer s.mu.Unlock()
		next, err := s.opts.Config.withNetworkSettings(p)
		if err != nil {
			return err
		}
		s.opts.Config = next
		f, _ := reflect.TypeFor[Config]().FieldByName("Network")
		if i := f.Index[0]; !slices.Contains(s.set, i) {
			s.set = append(s.set, i)
		}
		return nil
	}
	return err
}

// updateNetworkSettings applies p to the sandbox s names, through s (its
// state dir and test hooks), and adopts the result into s.
func updateNetworkSettings(ctx context.Context, s *Sandbox, p sandbox.NetworkPolicy) error {
	return withLockedMeta(ctx, s.opts.StateDir, s.opts.ID, func(dir string, m *meta) error {
		next, err := m.Config.withNetworkSettings(p)
		if err != nil {
			return err
		}
		if err := checkNetworkAvailable(&next); err != nil && m.alive() {
			return err
		}
		if err := checkLiveNetwork(m, &next); err != nil && m.alive() {
			return err
		}
		if m.alive() {
			err = s.applyNetwork(ctx, dir, m, next)
		} else {
			m.Config = next
		}
		s.mu.Lock()
		s.opts.Config = m.Config
		s.mu.Unlock()
		return err
	})
}

// withLockedMeta runs f on the metadata of the sandbox id, its folder
// locked, and writes the metadata back (also when f fails: f records
// what it changed).
func withLockedMeta(ctx context.Context, stateDir, id string, f func(dir string, m *meta) error) error {
	return withSandboxLock(ctx, stateDir, id, func(_ context.Context, dir string, m *meta) error {
		ferr := f(dir, m)
		if err := writeMeta(dir, m); err != nil {
			return stateDirError(filepath.Dir(filepath.Dir(dir)), err)
		}
		return ferr
	})
}

// PublishedHost is the host address published ports listen on: the
// host's loopback, so that only host processes reach them.
const PublishedHost = "127.0.0.1"

// PublishPort forwards TCP port hostPort of the host's loopback
// (127.0.0.1; 0 picks a free port) to sandboxPort of the sandbox, and
// returns the mapping. The sandbox's server must listen on
// all addresses (0.0.0.0) or on its interface's, not only on its own
// loopback. Published ports are kept across stops. It needs root and a
// sandbox in the public or allowList mode (one with an interface); the
// port must be free on the host and published by no other sandbox.
// No such sandbox: an error matching sandbox.ErrNotFound.
func (s *Sandbox) PublishPort(ctx context.Context, hostPort, sandboxPort int) (sandbox.PublishedPort, error) {
	id := s.opts.ID
	p := sandbox.PublishedPort{HostAddress: PublishedHost, HostPort: hostPort, SandboxPort: sandboxPort}
	if hostPort < 0 || hostPort > 65535 || sandboxPort < 1 || sandboxPort > 65535 {
		return p, fmt.Errorf("%w: ports are 1-65535 (host port 0: any free one); got %d:%d", sandbox.ErrInvalidArgument, hostPort, sandboxPort)
	}
	err := withLockedMeta(ctx, s.opts.StateDir, id, func(dir string, m *meta) error {
		if !m.Config.needsInterface() {
			return fmt.Errorf("%w: sandbox %q is in the %s network mode, with loopback only: nothing can reach it from outside; publish ports of a sandbox in the default or allowList mode", sandbox.ErrInvalidArgument, id, networkMode(&m.Config))
		}
		if i := slices.IndexFunc(m.Ports, func(q sandbox.PublishedPort) bool { return q.HostPort == hostPort && hostPort != 0 }); i >= 0 {
			return fmt.Errorf("%w: host port %d is published already, to sandbox port %d; unpublish it first", sandbox.ErrInvalidArgument, hostPort, m.Ports[i].SandboxPort)
		}
		var err error
		if p.HostPort, err = claimHostPort(ctx, m, hostPort); err != nil {
			return err
		}
		prev := m.Ports
		m.Ports = append(slices.Clone(m.Ports), p)
		if m.alive() {
			if err := applyPorts(ctx, m); err != nil {
				m.Ports = prev
				return err
			}
		}
		return nil
	})
	return p, err
}

// UnpublishPort stops forwarding hostPort to the sandbox. It fails with an
// error matching sandbox.ErrNotFound when there is no such sandbox, or
// when the sandbox does not publish hostPort.
func (s *Sandbox) UnpublishPort(ctx context.Context, hostPort int) error {
	id := s.opts.ID
	return withLockedMeta(ctx, s.opts.StateDir, id, func(dir string, m *meta) error {
		i := slices.IndexFunc(m.Ports, func(q sandbox.PublishedPort) bool { return q.HostPort == hostPort })
		if i < 0 {
			return fmt.Errorf("%w: host port %d is not published by sandbox %q", sandbox.ErrNotFound, hostPort, id)
		}
		m.Ports = slices.Delete(slices.Clone(m.Ports), i, i+1)
		if m.alive() {
			return applyPorts(ctx, m)
		}
		return nil
	})
}
