//go:build linux

package local

import (
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestUsernetDestination checks where the user-mode network sends the
// flows a sandbox opens, packet by packet as its stack sees them (so
// whatever the sandbox's root did to its own routes): DNS to its resolver
// goes to the host's, every address of the host (its loopback included),
// the user-mode network's own, private and link-local ranges and the
// sandboxes' links are refused in the public mode; the allowList mode lets
// its ranges through, never the host's loopback.
func TestUsernetDestination(t *testing.T) {
	host := netip.MustParseAddr("203.0.113.7")
	hosts := &hostNetsCache{}
	hosts.get()
	// The host's own addresses and one more, kept (not read again) for the
	// test's length.
	hosts.nets, hosts.at = append(hosts.nets, netip.PrefixFrom(host, 32)), time.Now().Add(time.Hour)
	public := &usernet{policy: usernetPolicyOf(&Config{}, netTestHooks{Resolver: netip.MustParseAddr("127.0.0.53")}), hosts: hosts}
	for _, c := range []struct {
		addr string
		port uint16
		to   string // "": refused
	}{
		{"10.0.2.3", 53, "127.0.0.53:53"},
		{"10.0.2.3", 80, ""},
		{"10.0.2.2", 22, ""},
		{"10.0.2.100", 22, ""},
		{"127.0.0.1", 80, ""},
		{"127.0.0.53", 53, ""},
		{"203.0.113.7", 80, ""},
		{"10.1.2.3", 80, ""},
		{"172.16.0.1", 80, ""},
		{"192.168.1.1", 80, ""},
		{"100.64.0.1", 80, ""},
		{"169.254.169.254", 80, ""},
		{"224.0.0.251", 5353, ""},
		{"255.255.255.255", 67, ""},
		{"0.0.0.0", 80, ""},
		{"10.231.0.2", 80, ""},
		{"203.0.113.10", 443, "203.0.113.10:443"},
		{"8.8.8.8", 53, "8.8.8.8:53"},
	} {
		to, why := public.destination(tcpip.AddrFromSlice(netip.MustParseAddr(c.addr).AsSlice()), c.port)
		if to != c.to || (to == "") == (why == "") {
			t.Errorf("public mode, %s:%d: to %q (refused: %q), want to %q", c.addr, c.port, to, why, c.to)
		}
	}
	allowList := &Config{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}}
	allow := &usernet{policy: usernetPolicyOf(allowList, netTestHooks{}), hosts: hosts}
	for addr, ok := range map[string]bool{"10.1.2.3": true, "10.2.0.1": false, "8.8.8.8": false, "127.0.0.1": false, "203.0.113.7": false} {
		to, _ := allow.destination(tcpip.AddrFromSlice(netip.MustParseAddr(addr).AsSlice()), 80)
		if (to != "") != ok {
			t.Errorf("allowList mode, %s: to %q, want reached %v", addr, to, ok)
		}
	}
}

// TestUsernetFlowLimit: past its bound of flows at once the user-mode
// network refuses a new one, and takes one again once a flow ended.
func TestUsernetFlowLimit(t *testing.T) {
	u := &usernet{flows: make(chan struct{}, 2)}
	for i := range 2 {
		if !u.takeFlow() {
			t.Fatalf("refused flow %d under the bound of 2", i+1)
		}
	}
	if u.takeFlow() {
		t.Fatal("took a flow past the bound")
	}
	u.endFlow()
	if !u.takeFlow() {
		t.Fatal("refused a flow once one ended")
	}
}
