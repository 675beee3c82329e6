//go:build linux

package local_test

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
)

// addrPort formats a and port for a probe.
func addrPort(a netip.Addr, port int) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(port))
}

func TestNetworkLabSmoke(t *testing.T) {
	lab := newNetLab(t)
	sb := lab.sandbox(t, local.Config{})
	t.Log(mustRun(t, sb, "cat /etc/resolv.conf; cat /proc/net/dev; ip addr; ip route; ip -6 route"))
	for _, a := range []netip.Addr{labPublic4, labPublic6, labPrivate["10/8"]} {
		t.Log(a, runProbe(t, sb, "tcp", addrPort(a, lab.Port)))
	}
	t.Log("dns", runProbe(t, sb, "resolve", "public.test"), lab.Queries())
}
