package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// nonPublic lists the ranges that are not public unicast, with what they
// are, for refusals. IPv4-mapped addresses are unmapped first; NAT64 and
// 6to4 addresses are judged by the IPv4 address they carry.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a 'this network' address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud metadata lives there)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a reserved address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001::/23"), "a reserved address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// classify returns "" when a is a public unicast address, else what it
// is ("a loopback address", …).
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return classify(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if a.Is6() && !global6.Contains(a) {
		return "a reserved address"
	}
	return ""
}

// hostAddrs knows the addresses of this host's interfaces, read again at
// most every few seconds: the sandbox must not reach the host's services
// through its public address either.
type hostAddrs struct {
	mu   sync.Mutex
	at   time.Time
	addr map[netip.Addr]struct{}
}

// hostAddrsTTL is how long the host's addresses are cached.
const hostAddrsTTL = 5 * time.Second

// has reports whether a is an address of this host.
func (h *hostAddrs) has(a netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.addr == nil || time.Since(h.at) > hostAddrsTTL {
		h.addr = map[netip.Addr]struct{}{}
		h.at = time.Now()
		addrs, _ := net.InterfaceAddrs()
		for _, ia := range addrs {
			if n, ok := ia.(*net.IPNet); ok {
				if x, ok := netip.AddrFromSlice(n.IP); ok {
					h.addr[x.Unmap()] = struct{}{}
				}
			}
		}
	}
	_, ok := h.addr[a.Unmap().WithZone("")]
	return ok
}
