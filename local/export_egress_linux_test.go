package local

import "net/netip"

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

// EgressProxyPID returns the host pid of the sandbox's running egress
// proxy helper, or 0.
func EgressProxyPID(s *Sandbox) int {
	m, err := readMeta(s.dir)
	if err != nil || m.EgressProxy == nil {
		return 0
	}
	if st, ok := procStartTime(m.EgressProxy.PID); !ok || st != m.EgressProxy.StartTime {
		return 0
	}
	return m.EgressProxy.PID
}
