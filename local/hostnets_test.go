//go:build linux

package local_test

import (
	"net/netip"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
)

// TestNetworkPublicRefusesHostNetworks: a sandbox of the default (public)
// mode reaches neither the networks its host sits on, public ones
// included (the lab's uplink is on 198.51.100.0/24 and 2001:db8:1::/64,
// where inet answers too), nor the clouds' host addresses outside the
// link-local range; the lab's host reaches them all (the control), and
// the sandbox still reaches the public addresses beyond.
func TestNetworkPublicRefusesHostNetworks(t *testing.T) {
	lab := newNetLab(t)
	cloud := []netip.Addr{
		netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
		netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
		netip.MustParseAddr("fd20:ce::254"),    // Google Cloud metadata over IPv6
	}
	// inet answers on them, inside the lab only.
	in := nlHandle(t, lab.inet)
	lo, err := in.LinkByName("lo")
	must(t, err)
	for _, a := range cloud {
		must(t, in.AddrAdd(lo, nlAddr(netip.PrefixFrom(a, a.BitLen()).String())))
	}
	sb := lab.sandbox(t, local.Config{})
	neighbour6 := netip.MustParseAddr("2001:db8:1::2")
	for _, a := range append([]netip.Addr{labNeighbour, neighbour6}, cloud...) {
		if got := runProbe(t, sb, "tcp", addrPort(a, lab.Port)); got != refusedTCP {
			t.Errorf("%s: %s, want %s (a reset by the firewall)", a, got, refusedTCP)
		}
		if g, err := lab.dial(addrPort(a, lab.Port)); err != nil || g != "hello from "+a.String() {
			t.Errorf("control: the lab's host reaching %s: %q %v", a, g, err)
		}
	}
	for _, a := range []netip.Addr{labPublic4, labPublic6} {
		if got := runProbe(t, sb, "tcp", addrPort(a, lab.Port)); got != "ok" {
			t.Errorf("the public %s: %s, want ok", a, got)
		}
	}
}
