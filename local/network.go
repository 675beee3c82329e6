package local

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/agentbox-dev/agentbox/local/internal/netfilter"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The network of a sandbox: its options, their validation, and how Info
// and Instructions tell them. How they are put in place is in
// network_linux.go (and the files it names).
//
// Modes, by Config.Network.Mode (a sandbox.NetworkPolicy, validated by
// sandbox's one validator, NetworkPolicy.Canonical):
//
//	public (the default)    the public internet only, DNS through the host's resolver
//	blocked                 loopback only
//	allowList, Allow only   the listed address ranges only, no DNS
//	allowList, Domains only domainAllowList: loopback only, the listed names through the egress proxy
//	allowList, both lists   the listed ranges directly, the listed names through the proxy
//	host                    the host's own network namespace (unsafe)

// withNetworkSettings returns c with the network policy p, validated and
// in canonical form.
func (c Config) withNetworkSettings(p sandbox.NetworkPolicy) (Config, error) {
	if c.Network.Mode == sandbox.NetworkHost {
		return c, fmt.Errorf("%w: the sandbox was created with Network.Mode host (HostNetwork): it shares the host's network namespace, whose policy agentbox does not set; remove it and create it without HostNetwork", sandbox.ErrInvalidArgument)
	}
	if p.Mode == sandbox.NetworkHost {
		return c, fmt.Errorf("%w: Network.Mode host (HostNetwork) is chosen when a sandbox is created, not changed later: create a sandbox with it", sandbox.ErrInvalidArgument)
	}
	c.Network = p
	err := normalizeNetwork(&c)
	return c, err
}

// normalizeNetwork validates the network policy of c and puts it in
// canonical form: sandbox's rules, and local's own one that the
// sandboxes' links are never listed.
func normalizeNetwork(c *Config) error {
	p, err := c.Network.Canonical()
	if err != nil {
		return fmt.Errorf("Config.Network: %w", err)
	}
	for _, a := range p.Allow {
		if what := netfilter.NeverReachable(a); what != "" {
			return fmt.Errorf("%w: Config.Network.Allow entry %q lies in %s, which a sandbox never reaches", sandbox.ErrInvalidArgument, a, what)
		}
	}
	c.Network = p
	return nil
}

// ownNetwork reports whether the sandbox of c has a network namespace of
// its own.
func (c *Config) ownNetwork() bool { return c.Network.Mode != sandbox.NetworkHost }

// networkMode returns the mode of a sandbox shaped by c, as Info tells
// it.
func networkMode(c *Config) sandbox.NetworkMode { return c.Network.InfoMode() }

// hasDomains reports whether the sandbox of c reaches names through the
// egress proxy.
func (c *Config) hasDomains() bool { return len(c.Network.Domains) > 0 }

// needsInterface reports whether the sandbox of c reaches addresses
// outside itself directly, through an interface of its own (the public
// and allowList modes); otherwise it has loopback only.
func (c *Config) needsInterface() bool {
	m := networkMode(c)
	return m == sandbox.NetworkPublic || m == sandbox.NetworkAllowList
}

// networkInstructions is the sentence of Instructions about the network.
func networkInstructions(c *Config) string {
	proxy := ""
	if c.hasDomains() {
		proxy = fmt.Sprintf("These domains are reachable through the proxy at %s that HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name: %s (*.name covers the names below name, not name itself); other names and IP addresses are refused by the proxy.",
			egressProxyAddr, strings.Join(c.Network.Domains, ", "))
	}
	switch networkMode(c) {
	case sandbox.NetworkHost:
		return "Network access is shared with the host (its loopback services and networks are reachable)."
	case sandbox.NetworkBlocked:
		return "Network access is blocked."
	case sandbox.NetworkAllowList:
		s := fmt.Sprintf("Network access is limited to these address ranges: %s; connections elsewhere are refused, and DNS does not resolve inside the sandbox.", strings.ReplaceAll(c.Network.AllowListString(), ",", ", "))
		if proxy != "" {
			s += " " + proxy
		}
		return s
	case sandbox.NetworkDomainAllowList:
		return fmt.Sprintf("Network access is limited to these domains: %s (*.name covers the names below name, not name itself). "+
			"Connections go through the proxy at %s that HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name; other names, IP addresses and direct connections are refused, and DNS does not resolve inside the sandbox.",
			strings.Join(c.Network.Domains, ", "), egressProxyAddr)
	}
	return "Network access is limited to the public internet: connections to the host, private, shared and link-local addresses (cloud metadata) and other sandboxes are refused. Ports are reachable from the host only when published."
}

// netRecord is the host side of the network namespace of a running
// sandbox, when the host made it (as root).
type netRecord struct {
	// Link is n of the sandbox's link (agentbox<n> on the host, its
	// table inet agentbox-<n>); 0 while the sandbox has loopback only.
	Link int `json:"link,omitempty"`
	// Ifindex is the interface index of agentbox<Link>: a link of that
	// name with another index is another sandbox's.
	Ifindex int `json:"ifindex,omitempty"`
	// IPv6 is whether the link carries IPv6 (the uplink forwards it).
	IPv6 bool `json:"ipv6,omitempty"`
	// Resolver is where DNS queries to netfilter.SandboxDNS go.
	Resolver string `json:"resolver,omitempty"`
	// Uplink names the network namespace (a file) where the link ends;
	// empty for this host's. Only tests set it (netTestHooks).
	Uplink string `json:"uplink,omitempty"`
	// HostNets are the networks the uplink sits on (its addresses'
	// prefixes and its on-link routes), read at each attach: refused in
	// the public mode (uplink.Uplink.HostNets).
	HostNets []netip.Prefix `json:"hostNets,omitempty"`
}

// netTestHooks let tests give sandboxes an uplink namespace of their own
// (the "internet" they build) and a resolver in it; set only through
// export_test.go.
type netTestHooks struct {
	Uplink   string
	Resolver netip.Addr
	// Allow is a range the user-mode network (without root) reaches
	// despite its policy: the tests' loopback servers.
	Allow netip.Prefix
}
