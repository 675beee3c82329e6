package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/google/nftables"

	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/local/internal/uplink"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Published ports are DNAT rules of the sandbox's table (chain output,
// package netfilter): a connection from a host process to
// 127.0.0.1:PORT goes to the sandbox's address, and appears there to
// come from its gateway. No process serves them, and they go with the
// sandbox's table. Nothing listens on 127.0.0.1:PORT, so the port is
// checked free when it is published; a host process that listens on it
// later is shadowed for the host's own connections.

// claimHostPort returns port, or a free port when it is 0, after checking
// that no host process listens on it and no other sandbox publishes it,
// in the uplink of the sandbox m.
func claimHostPort(ctx context.Context, m *meta, port int) (int, error) {
	if !hostMakesNetns() {
		return 0, fmt.Errorf("%w: publishing ports needs root (a firewall rule of the host)", sandbox.ErrIsolationUnavailable)
	}
	path, own := "", 0
	if m.Network != nil {
		path, own = m.Network.Uplink, m.Network.Link
	}
	var ns *os.File
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		ns = f
	}
	err := inNetns(ns, func() error {
		ln, err := net.Listen("tcp", net.JoinHostPort(PublishedHost, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("%w: host port %d: %v; choose another (0: any free one)", sandbox.ErrInvalidArgument, port, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	if err != nil {
		return 0, err
	}
	err = uplink.Read(path, func(c *nftables.Conn) error {
		n, err := netfilter.Publisher(c, port)
		if err == nil && n != 0 && n != own {
			return fmt.Errorf("%w: host port %d is published by another sandbox (link agentbox%d); choose another", sandbox.ErrInvalidArgument, port, n)
		}
		return nil
	})
	return port, err
}
