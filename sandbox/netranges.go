package sandbox

import (
	"net/netip"
	"slices"
)

// AddressRange is a named address range.
type AddressRange struct {
	Prefix netip.Prefix
	// What names the range in errors, e.g. "loopback".
	What string
}

// neverRanges are never reachable from a sandbox of any engine, whatever
// its policy: loopback, link-local (cloud metadata), unspecified,
// multicast and reserved ranges, and the addresses where clouds serve a
// machine its metadata, credentials or host agent outside the
// link-local range (most serve them at 169.254.169.254, refused with
// link-local addresses).
var neverRanges = slices.Concat(
	namedRanges("loopback", "127.0.0.0/8", "::1/128"),
	namedRanges("link-local addresses (cloud metadata lives there)", "169.254.0.0/16", "fe80::/10"),
	namedRanges("the unspecified range", "0.0.0.0/8", "::/128"),
	namedRanges("multicast", "224.0.0.0/4", "ff00::/8"),
	namedRanges("a reserved range", "240.0.0.0/4", "::ffff:0:0/96", "fec0::/10"),
	// AWS: the instance metadata service (IMDS) over IPv6 (Nitro).
	namedRanges("a cloud's metadata service (AWS IMDS over IPv6)", "fd00:ec2::254/128"),
	// Google Cloud: the metadata server over IPv6
	// (metadata.google.internal is 169.254.169.254 over IPv4).
	namedRanges("a cloud's metadata service (Google Cloud over IPv6)", "fd20:ce::254/128"),
	// Azure: the WireServer (VM agent, extensions' settings, the host's
	// DNS and health probes), a public address.
	namedRanges("a cloud's host agent (Azure WireServer)", "168.63.129.16/32"),
	// Alibaba Cloud: the metadata service.
	namedRanges("a cloud's metadata service (Alibaba Cloud)", "100.100.100.200/32"),
)

// NeverReachableRanges returns the ranges no sandbox reaches, whatever
// its policy: an engine refuses them in its firewall, and
// [NetworkPolicy.Canonical] refuses allow lists inside them.
func NeverReachableRanges() []AddressRange {
	return append([]AddressRange(nil), neverRanges...)
}

// NeverReachable returns what p lies in when every address of p is in a
// range of [NeverReachableRanges], else "".
func NeverReachable(p netip.Prefix) string {
	for _, r := range neverRanges {
		if r.Prefix.Bits() <= p.Bits() && r.Prefix.Contains(p.Addr()) {
			return r.What
		}
	}
	return ""
}

func namedRanges(what string, prefixes ...string) []AddressRange {
	out := make([]AddressRange, len(prefixes))
	for i, p := range prefixes {
		out[i] = AddressRange{netip.MustParsePrefix(p), what}
	}
	return out
}
