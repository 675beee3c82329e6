package netfilter

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestSandboxLink: link n gets the n-th /30 of 10.231.0.0/16 and the n-th
// /64 of fd61:6762:6f78::/48, gateway first; link 0's gateway is
// SandboxDNS.
func TestSandboxLink(t *testing.T) {
	gw4, sbx4, gw6, sbx6 := SandboxLink(3)
	if got := fmt.Sprint(gw4, sbx4, gw6, sbx6); got != "10.231.0.13 10.231.0.14 fd61:6762:6f78:3::1 fd61:6762:6f78:3::2" {
		t.Errorf("link 3: %s", got)
	}
	gw4, _, _, _ = SandboxLink(MaxLinks - 1)
	if !sandboxRange4.Contains(gw4) {
		t.Errorf("the last link's gateway %s is outside %s", gw4, sandboxRange4)
	}
	if gw0, _, _, _ := SandboxLink(0); gw0 != SandboxDNS {
		t.Errorf("link 0's gateway %s, SandboxDNS %s", gw0, SandboxDNS)
	}
}

// TestNeverReachable: prefixes wholly inside a never-reachable range are
// named; wider or public ones are not.
func TestNeverReachable(t *testing.T) {
	for p, never := range map[string]bool{
		"127.0.0.0/8": true, "169.254.169.254/32": true, "10.231.4.0/30": true, "fd61:6762:6f78:1::/64": true,
		"203.0.113.0/24": false, "10.0.0.0/8": false, "0.0.0.0/0": false, "2001:db8::/32": false,
	} {
		if got := NeverReachable(netip.MustParsePrefix(p)); (got != "") != never {
			t.Errorf("NeverReachable(%s) = %q, want never reachable: %v", p, got, never)
		}
	}
}

// TestBlockedPrefixes: an IPv4 range is blocked also through its NAT64
// and 6to4 images; an IPv6 one as it is.
func TestBlockedPrefixes(t *testing.T) {
	got := blockedPrefixes(ranges("x", "192.168.0.0/16", "fc00::/7"))
	if fmt.Sprint(got) != "[192.168.0.0/16 64:ff9b::c0a8:0/112 2002:c0a8::/32 fc00::/7]" {
		t.Errorf("blocked %v", got)
	}
}

// TestMergePrefixes: the ranges of an interval set are sorted, and
// overlapping and adjacent prefixes merged, up to the last address.
func TestMergePrefixes(t *testing.T) {
	var ps []netip.Prefix
	for _, s := range []string{"10.0.1.0/24", "10.0.0.0/24", "10.0.0.128/25", "10.0.3.0/24", "255.255.255.255/32"} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	var got []string
	for _, r := range mergePrefixes(ps) {
		got = append(got, r.first.String()+"-"+r.last.String())
	}
	if fmt.Sprint(got) != "[10.0.0.0-10.0.1.255 10.0.3.0-10.0.3.255 255.255.255.255-255.255.255.255]" {
		t.Errorf("merged %s", got)
	}
}

func TestRefusal(t *testing.T) {
	host := []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}
	for a, refused := range map[string]bool{
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"100.64.0.1": true, "169.254.169.254": true, "fd00::1": true, "fe80::1": true,
		"224.0.0.1": true, "0.0.0.0": true, "10.231.0.6": true, "64:ff9b::a01:203": true,
		"::ffff:10.0.0.1": true, "203.0.113.7": true,
		"203.0.113.10": false, "198.51.100.5": false, "8.8.8.8": false, "2001:db8:2::10": false,
	} {
		if got := Refusal(netip.MustParseAddr(a), host); (got != "") != refused {
			t.Errorf("Refusal(%s) = %q, want refused %v", a, got, refused)
		}
	}
	if got := NeverRefusal(netip.MustParseAddr("10.1.2.3"), host); got != "" {
		t.Errorf("NeverRefusal(10.1.2.3) = %q: a private range may be allowed", got)
	}
	if got := NeverRefusal(netip.MustParseAddr("127.0.0.1"), host); got == "" {
		t.Error("NeverRefusal(127.0.0.1) is empty")
	}
}
