package local

import (
	"context"
	"net/netip"
	"slices"
)

// SetEgressTestHooks makes the egress proxy that the next boot of s starts
// resolve the names of hosts (name → address), and no other name, and,
// when allowNonPublic, reach non-public addresses: test origin servers
// listen on the host's loopback.
func SetEgressTestHooks(s *Sandbox, hosts map[string]string, allowNonPublic bool) {
	h := egressTestHooks{Hosts: map[string][]netip.Addr{}, AllowNonPublic: allowNonPublic}
	for name, addr := range hosts {
		h.Hosts[name] = []netip.Addr{netip.MustParseAddr(addr)}
	}
	s.egressTest = h
}

// EgressProxyPID returns the host pid of the state dir's shared egress
// proxy when it serves the sandbox s, or 0.
func EgressProxyPID(s *Sandbox) int {
	c, err := openEgress(context.Background(), s.opts.StateDir, false)
	if err != nil {
		return 0
	}
	defer c.close()
	r, err := c.call(egressRequest{Op: "status"}, nil)
	if err != nil || !slices.Contains(r.Serves, s.ID()) {
		return 0
	}
	return r.PID
}
