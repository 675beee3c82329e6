package netfilter

import (
	"net/netip"
	"slices"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Address ranges of the network policy (the firewall, netfilter_linux.go,
// and the validation of allow lists: NeverReachable).

// sandboxRange4 and sandboxRange6 hold the links between the host and its
// sandboxes: sandbox n gets 10.231.0.0/16's n-th /30 and
// fd61:6762:6f78::/48's n-th /64 (gateway .1 / ::1, sandbox .2 / ::2).
var (
	sandboxRange4 = netip.MustParsePrefix("10.231.0.0/16")
	sandboxRange6 = netip.MustParsePrefix("fd61:6762:6f78::/48")
)

// MaxLinks is how many sandbox links sandboxRange4 holds (index 0 is
// never used).
const MaxLinks = 1 << 14

// SandboxDNS is the resolver a sandbox with a link of its own is given
// (its resolv.conf): the address of link 0, which is never a sandbox's,
// so that it stays the same whatever link the sandbox gets. The firewall
// forwards queries to it to the host's resolver in the public mode, and
// refuses them in the others.
var SandboxDNS = netip.MustParseAddr("10.231.0.1")

// addrRange is a named address range.
type addrRange struct {
	prefix netip.Prefix
	what   string
}

func ranges(what string, prefixes ...string) []addrRange {
	out := make([]addrRange, len(prefixes))
	for i, p := range prefixes {
		out[i] = addrRange{netip.MustParsePrefix(p), what}
	}
	return out
}

// neverRanges are never reachable from a sandbox, whatever its policy:
// those of every engine (sandbox.NeverReachableRanges: loopback,
// link-local, unspecified, multicast and reserved ranges, clouds'
// metadata services) and the sandboxes' own links. (The host's own
// addresses are refused by the firewall's input chain, not by range.)
var neverRanges = append(engineNeverRanges(),
	addrRange{sandboxRange4, "the sandboxes' own links"}, addrRange{sandboxRange6, "the sandboxes' own links"})

// engineNeverRanges returns sandbox.NeverReachableRanges as addrRanges.
func engineNeverRanges() []addrRange {
	var out []addrRange
	for _, r := range sandbox.NeverReachableRanges() {
		out = append(out, addrRange{r.Prefix, r.What})
	}
	return out
}

// privateRanges are refused in the default (public) mode, besides
// neverRanges: private and shared ranges, where the host's networks are.
var privateRanges = slices.Concat(
	ranges("a private range", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
	ranges("the shared (carrier-grade NAT) range", "100.64.0.0/10"),
	ranges("a reserved range", "192.0.0.0/24", "198.18.0.0/15", "100::/64", "64:ff9b:1::/48"),
)

// hostRanges names the prefixes of the host's own networks (hostNets).
func hostRanges(ps []netip.Prefix) []addrRange {
	out := make([]addrRange, len(ps))
	for i, p := range ps {
		out[i] = addrRange{p, "the host's own networks"}
	}
	return out
}

// NeverReachable returns what p lies in when every address of p is in
// the ranges a sandbox never reaches, whatever its policy, else "".
func NeverReachable(p netip.Prefix) string {
	for _, r := range neverRanges {
		if r.prefix.Bits() <= p.Bits() && r.prefix.Contains(p.Addr()) {
			return r.what
		}
	}
	return ""
}

// blockedPrefixes returns the prefixes of rs and, for each IPv4 one, its
// images in the NAT64 well-known prefix (64:ff9b::/96) and in 6to4
// (2002::/16), through which a translator on the path would reach it.
func blockedPrefixes(rs ...[]addrRange) []netip.Prefix {
	nat64 := netip.MustParseAddr("64:ff9b::").As16()
	var out []netip.Prefix
	for _, l := range rs {
		for _, r := range l {
			p := r.prefix
			out = append(out, p)
			if !p.Addr().Is4() {
				continue
			}
			v4 := p.Addr().As4()
			a := nat64
			copy(a[12:], v4[:])
			out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 96+p.Bits()))
			var b [16]byte
			b[0], b[1] = 0x20, 0x02
			copy(b[2:6], v4[:])
			out = append(out, netip.PrefixFrom(netip.AddrFrom16(b), 16+p.Bits()))
		}
	}
	return out
}

// SandboxLink returns the addresses of the link of sandbox n: the
// gateway's (the host's end) and the sandbox's, v4 and v6.
func SandboxLink(n int) (gw4, sbx4, gw6, sbx6 netip.Addr) {
	b4 := sandboxRange4.Addr().As4()
	base := uint32(b4[0])<<24 | uint32(b4[1])<<16 | uint32(b4[2])<<8 | uint32(b4[3])
	base += uint32(n) * 4
	at := func(off uint32) netip.Addr {
		v := base + off
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	b6 := sandboxRange6.Addr().As16()
	b6[6], b6[7] = byte(n>>8), byte(n)
	b6[15] = 1
	gw6 = netip.AddrFrom16(b6)
	b6[15] = 2
	return at(1), at(2), gw6, netip.AddrFrom16(b6)
}

// ipRange is an inclusive range of addresses of one family.
type ipRange struct{ first, last netip.Addr }

// mergePrefixes returns the ranges the prefixes of one family cover,
// sorted, overlapping and adjacent ones merged: what an nftables interval
// set holds.
func mergePrefixes(prefixes []netip.Prefix) []ipRange {
	rs := make([]ipRange, 0, len(prefixes))
	for _, p := range prefixes {
		rs = append(rs, ipRange{p.Masked().Addr(), lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b ipRange) int { return a.first.Compare(b.first) })
	var out []ipRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			cur := &out[n-1]
			if next := cur.last.Next(); !next.IsValid() || r.first.Compare(next) <= 0 {
				if r.last.Compare(cur.last) > 0 {
					cur.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Refusal returns what the address a lies in when a sandbox of the
// public mode may not reach it, else "": the ranges the firewall refuses
// (neverRanges, privateRanges, with their NAT64 and 6to4 images) and
// hostNets, the host's own networks. The user-mode network of a sandbox
// without root applies it to every flow (the host's own addresses are
// the caller's to add to hostNets).
func Refusal(a netip.Addr, hostNets []netip.Prefix) string {
	a = a.Unmap()
	for _, l := range [][]addrRange{neverRanges, privateRanges, hostRanges(hostNets)} {
		for _, r := range l {
			for _, p := range blockedPrefixes([]addrRange{r}) {
				if p.Contains(a) {
					return r.what
				}
			}
		}
	}
	return ""
}

// NeverRefusal returns what the address a lies in when no sandbox
// reaches it whatever its policy (neverRanges, with their NAT64 and 6to4
// images, and hostNets), else "": the check of the allowList mode.
func NeverRefusal(a netip.Addr, hostNets []netip.Prefix) string {
	a = a.Unmap()
	for _, l := range [][]addrRange{neverRanges, hostRanges(hostNets)} {
		for _, r := range l {
			for _, p := range blockedPrefixes([]addrRange{r}) {
				if p.Contains(a) {
					return r.what
				}
			}
		}
	}
	return ""
}
