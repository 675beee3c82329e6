package egress

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		addr, want string // want: a word of the classification, "" for public
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "unique local"},
		{"fc00::1", "unique local"},
		{"100.64.0.1", "shared"},
		{"100.127.255.255", "shared"},
		{"0.0.0.0", "this network"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"192.0.2.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"64:ff9b::7f00:1", "loopback"},      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::1", "loopback"},       // 6to4 of 127.0.0.1
		{"::7f00:1", "reserved"},             // IPv4-compatible, deprecated
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8
	} {
		got := classify(netip.MustParseAddr(c.addr))
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("classify(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

func TestHostAddrs(t *testing.T) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil || len(ifaddrs) == 0 {
		t.Skipf("no interface addresses: %v", err)
	}
	var h hostAddrs
	for _, ia := range ifaddrs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, _ := netip.AddrFromSlice(n.IP)
		if !h.has(a) {
			t.Errorf("%s, an address of this host, is not known as one", a)
		}
	}
	if h.has(netip.MustParseAddr("192.0.2.77")) {
		t.Error("a documentation address is taken for one of this host")
	}
}

// TestPermitted: of a name's addresses only the public ones are dialled;
// a name with none is refused, saying which address and what it is.
func TestPermitted(t *testing.T) {
	p := New(Config{})
	pub, lo := netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("127.0.0.1")
	got, f := p.permitted("mixed.test", []netip.Addr{lo, pub})
	if f != nil || len(got) != 1 || got[0] != pub {
		t.Errorf("mixed addresses: %v %v, want only the public one", got, f)
	}
	_, f = p.permitted("lo.test", []netip.Addr{lo, netip.MustParseAddr("::1")})
	if f == nil || !f.policy || !strings.Contains(f.reason, "127.0.0.1 is a loopback address") {
		t.Errorf("loopback only: %v", f)
	}
	open := New(Config{AllowNonPublic: true})
	if got, f := open.permitted("lo.test", []netip.Addr{lo}); f != nil || len(got) != 1 {
		t.Errorf("AllowNonPublic: %v %v", got, f)
	}
}
