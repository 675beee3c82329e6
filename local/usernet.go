package local

import (
	"net/netip"

	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The user-mode network of a sandbox started without root (the public
// and allowList modes): the init makes a TUN device, usernetIface, in the
// network namespace it made (owned by the sandbox's user namespace) and
// hands its descriptor to the host, keeping none; a host process of the
// sandbox (usernetd_linux.go) serves the device's packets with a
// userspace TCP/IP stack (gVisor's netstack) and dials, from the host and
// as the user, the TCP and UDP flows the policy allows. The policy is
// host code, out of the sandbox's reach: the namespace has no other link
// out, and whatever its root does to its own routes or firewall only
// changes what reaches the device.
//
// Why this and not pasta (passt, as rootless Podman uses): pasta is a
// package to install, which CI and most laptops do not have, while
// gVisor's stack is Go code in this binary; and pasta has no destination
// filter of its own, so the policy would have to be nftables rules in the
// sandbox's namespace, whose owner, the sandbox's root, can flush them.
// Here the policy is host code applied to every flow (docs/security.md,
// "The default network without root").

// The user-mode network's addresses, inside the sandbox: the sandbox's
// on usernetIface, the gateway (the stack) and the resolver (the stack,
// which forwards queries to the host's resolver). They lie in a private
// range, which the policy refuses as destinations: the gateway and every
// other address of the /24 are the stack's alone.
var (
	usernetPrefix   = netip.MustParsePrefix("10.0.2.100/24")
	usernetGateway  = netip.MustParseAddr("10.0.2.2")
	usernetResolver = netip.MustParseAddr("10.0.2.3")
)

const (
	// usernetIface is the TUN device's name inside the sandbox.
	usernetIface = "ab0"
	// usernetMTU is the device's MTU: large, so that a bulk transfer
	// costs few packets through the stack.
	usernetMTU = 65520
	// usernetLogFile, in the sandbox folder, is the policy log of the
	// user-mode network (the egress proxy keeps egressLogFile).
	usernetLogFile = "usernet-log.json"
)

// usernetNote is what Info.Network.Note says of the user-mode network.
const usernetNote = "without root the network is user-mode: TCP and UDP over IPv4 are relayed by a host process that applies the policy; ICMP (ping) and IPv6 are not relayed; the network mode and Network.Allow cannot change while the sandbox runs"

// usernetRecord is the running host process of a sandbox's user-mode
// network.
type usernetRecord struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

// usernetPolicy is what the user-mode network lets through: the public
// internet (Allow nil) or the ranges of Allow, never the host's own
// addresses and networks nor the ranges no sandbox reaches.
type usernetPolicy struct {
	// Allow, when not nil, is the allowList mode's ranges.
	Allow []netip.Prefix `json:"allow,omitempty"`
	// Resolver is where DNS queries to usernetResolver go ("": the
	// host's first nameserver).
	Resolver string `json:"resolver,omitempty"`
	// TestAllow are addresses tests reach despite the policy (their
	// loopback servers); set only through netTestHooks.
	TestAllow []netip.Prefix `json:"testAllow,omitempty"`
}

// usernetPolicyOf returns the user-mode network's policy of the sandbox
// shaped by c, with the test hooks t.
func usernetPolicyOf(c *Config, t netTestHooks) usernetPolicy {
	var p usernetPolicy
	if t.Allow.IsValid() {
		p.TestAllow = []netip.Prefix{t.Allow}
	}
	if t.Resolver.IsValid() {
		p.Resolver = netip.AddrPortFrom(t.Resolver, 53).String()
	}
	if networkMode(c) == sandbox.NetworkAllowList {
		p.Allow = append([]netip.Prefix{}, c.Network.Allow...)
	}
	return p
}

// refusal returns why the policy refuses a flow to a, whose host's own
// networks are hostNets, or "".
func (p *usernetPolicy) refusal(a netip.Addr, hostNets []netip.Prefix) string {
	a = a.Unmap()
	if usernetPrefix.Masked().Contains(a) {
		return "the user-mode network's own addresses"
	}
	for _, t := range p.TestAllow {
		if t.Contains(a) {
			return ""
		}
	}
	if p.Allow == nil {
		return netfilter.Refusal(a, hostNets)
	}
	if what := netfilter.NeverRefusal(a, hostNets); what != "" {
		return what
	}
	for _, pr := range p.Allow {
		if pr.Contains(a) {
			return ""
		}
	}
	return "not in the allow list"
}
