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

// SetSecretsTestRoots makes the proxies that substitute s's secrets
// verify upstream hosts against rootsPEM (the test server's own CA) in
// place of the host's trust store; like the other egress test hooks it is
// never persisted.
func SetSecretsTestRoots(s *Sandbox, rootsPEM []byte) { s.egressTest.RootCAs = string(rootsPEM) }
