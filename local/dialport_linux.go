package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"strconv"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// DialPort connects to TCP port of the running sandbox, at the address of
// the sandbox's interface, as a host process reaching a published port
// would, but without publishing anything: the socket is made inside the
// sandbox's network namespace (on a thread that ends with the call), so no
// host port is taken, no firewall rule is added, and nothing is left when
// the connection ends.
// The address is the host's record of the sandbox's link, never one the
// sandbox names, and the sandbox cannot change where it leads (its
// namespace's interfaces and routes are the host's).
//
// The sandbox's server must listen on all addresses (0.0.0.0) or on its
// interface's: its loopback, where the egress proxy of a domain allow
// list listens, is out of reach. Like PublishPort, it needs a sandbox in
// the public or allowList mode, whose network the host made (as root);
// other sandboxes fail with an error matching sandbox.ErrInvalidArgument.
// No such sandbox: an error matching sandbox.ErrNotFound.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d: TCP ports are 1-65535", sandbox.ErrInvalidArgument, port)
	}
	id := s.opts.ID
	m, err := readMeta(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(s.opts.StateDir, id)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: read metadata: %w", id, err)
	}
	if !m.alive() {
		return nil, fmt.Errorf("%w: sandbox %q does not run: start it first", sandbox.ErrInvalidArgument, id)
	}
	if m.Network == nil || m.Network.Link == 0 {
		return nil, fmt.Errorf("%w: sandbox %q is in the %s network mode, with loopback only: nothing can reach its ports from outside; use a sandbox in the default or NetworkAllowList mode", sandbox.ErrInvalidArgument, id, networkMode(&m.Config))
	}
	ns, err := openInitNetns(m.Init)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: %w", id, err)
	}
	defer ns.Close()
	_, sbx4, _, _ := sandboxLink(m.Network.Link)
	addr := netip.AddrPortFrom(sbx4, uint16(port)).String()
	var c net.Conn
	err = inNetns(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: port %s: %w", id, strconv.Itoa(port), err)
	}
	return c, nil
}
