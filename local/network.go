package local

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The network of a sandbox: its options, their validation, and how Info
// and Instructions tell them. How they are put in place is in
// network_linux.go (and the files it names).
//
// Modes, by the Config fields set:
//
//	none                    public: the public internet only, DNS through the host's resolver
//	NetworkBlockAll         blocked: loopback only
//	NetworkAllowList        allowList: the listed address ranges only, no DNS
//	DomainAllowList         domainAllowList: loopback only, the listed names through the egress proxy
//	both lists              allowList: the listed ranges directly, the listed names through the proxy
//	HostNetwork             host: the host's own network namespace (unsafe)

// MaxNetworkAllowListEntries is the most entries a NetworkAllowList holds:
// Daytona's cap, so that a list written for one engine works on the other.
const MaxNetworkAllowListEntries = 10

// NetworkSettings is the network policy of a sandbox, as
// [Sandbox.UpdateNetworkSettings] sets it (named after Daytona's
// updateNetworkSettings). The zero value is the default: the public
// internet only. Each field means what the [Config] field of the same
// name means.
type NetworkSettings struct {
	// BlockAll leaves the sandbox loopback only (Config.NetworkBlockAll).
	BlockAll bool `json:"networkBlockAll,omitempty"`
	// AllowList is a comma-separated list of CIDRs
	// (Config.NetworkAllowList).
	AllowList string `json:"networkAllowList,omitempty"`
	// DomainAllowList is a comma-separated list of names
	// (Config.DomainAllowList).
	DomainAllowList string `json:"domainAllowList,omitempty"`
}

// withNetworkSettings returns c with the network policy ns, validated and
// in canonical form.
func (c Config) withNetworkSettings(ns NetworkSettings) (Config, error) {
	if c.HostNetwork {
		return c, fmt.Errorf("%w: the sandbox was created with HostNetwork: it shares the host's network namespace, whose policy agentbox does not set; remove it and create it without HostNetwork", sandbox.ErrInvalidArgument)
	}
	c.NetworkBlockAll, c.NetworkAllowList, c.DomainAllowList = ns.BlockAll, ns.AllowList, ns.DomainAllowList
	err := normalizeNetwork(&c)
	return c, err
}

// normalizeNetwork validates the network options of c and puts its lists
// in canonical form.
func normalizeNetwork(c *Config) error {
	if c.HostNetwork && (c.NetworkBlockAll || strings.TrimSpace(c.NetworkAllowList) != "" || strings.TrimSpace(c.DomainAllowList) != "") {
		return fmt.Errorf("%w: HostNetwork shares the host's network namespace, where no policy applies; it cannot be combined with NetworkBlockAll, NetworkAllowList or DomainAllowList: set HostNetwork alone, or a policy without it", sandbox.ErrInvalidArgument)
	}
	if c.NetworkBlockAll && strings.TrimSpace(c.NetworkAllowList) != "" {
		return fmt.Errorf("%w: NetworkAllowList and NetworkBlockAll are two network modes, and a sandbox has one: NetworkBlockAll allows nothing, NetworkAllowList the ranges it lists; set one of them", sandbox.ErrInvalidArgument)
	}
	var err error
	if c.DomainAllowList, err = normalizeDomainAllowList(c); err != nil {
		return err
	}
	if strings.TrimSpace(c.NetworkAllowList) == "" {
		c.NetworkAllowList = ""
		return nil
	}
	prefixes, err := parseAllowCIDRs(c.NetworkAllowList)
	if err != nil {
		return err
	}
	c.NetworkAllowList = joinPrefixes(prefixes)
	return nil
}

// parseAllowCIDRs parses a NetworkAllowList: comma-separated CIDRs or
// addresses, each reachable by policy, MaxNetworkAllowListEntries at most.
func parseAllowCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, err := parseAllowCIDR(e)
		if err != nil {
			return nil, fmt.Errorf("%w: NetworkAllowList entry %q: %v", sandbox.ErrInvalidArgument, e, err)
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if len(out) == MaxNetworkAllowListEntries {
			return nil, fmt.Errorf("%w: NetworkAllowList has more than %d entries (Daytona's cap, kept so that a list works on both engines); cover neighbouring ranges with one shorter prefix", sandbox.ErrInvalidArgument, MaxNetworkAllowListEntries)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: NetworkAllowList %q lists no CIDR; to block all traffic set NetworkBlockAll instead", sandbox.ErrInvalidArgument, list)
	}
	return out, nil
}

// parseAllowCIDR parses one entry of a NetworkAllowList.
func parseAllowCIDR(e string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(e, "/") {
		var err error
		if p, err = netip.ParsePrefix(e); err != nil {
			return p, fmt.Errorf("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32")
		}
	} else {
		a, err := netip.ParseAddr(e)
		if err != nil {
			return p, fmt.Errorf("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32, nor an IP address (names belong in DomainAllowList)")
		}
		if a.Zone() != "" {
			return p, fmt.Errorf("an address with a zone is not a destination")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, fmt.Errorf("an IPv4-mapped IPv6 range; write the IPv4 range instead")
	}
	if p != p.Masked() {
		return p, fmt.Errorf("has bits set past /%d; did you mean %s?", p.Bits(), p.Masked())
	}
	if what := neverReachable(p); what != "" {
		return p, fmt.Errorf("lies in %s, which a sandbox never reaches", what)
	}
	return p, nil
}

// joinPrefixes returns prefixes comma-separated.
func joinPrefixes(prefixes []netip.Prefix) string {
	s := make([]string, len(prefixes))
	for i, p := range prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// ownNetwork reports whether the sandbox of c has a network namespace of
// its own.
func (c *Config) ownNetwork() bool { return !c.HostNetwork }

// networkMode returns the mode of a sandbox shaped by c.
func networkMode(c *Config) sandbox.NetworkMode {
	switch {
	case c.HostNetwork:
		return sandbox.NetworkHost
	case c.NetworkBlockAll:
		return sandbox.NetworkBlocked
	case c.NetworkAllowList != "":
		return sandbox.NetworkAllowList
	case c.DomainAllowList != "":
		return sandbox.NetworkDomainAllowList
	}
	return sandbox.NetworkPublic
}

// needsInterface reports whether the sandbox of c reaches addresses
// outside itself directly, through an interface of its own (the public
// and allowList modes); otherwise it has loopback only.
func (c *Config) needsInterface() bool {
	m := networkMode(c)
	return m == sandbox.NetworkPublic || m == sandbox.NetworkAllowList
}

// splitList splits a canonical comma-separated list; nil when empty.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// networkInstructions is the sentence of Instructions about the network.
func networkInstructions(c *Config) string {
	proxy := ""
	if c.DomainAllowList != "" {
		proxy = fmt.Sprintf("These domains are reachable through the proxy at %s that HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name: %s (*.name covers the names below name, not name itself); other names and IP addresses are refused by the proxy.",
			egressProxyAddr, strings.ReplaceAll(c.DomainAllowList, ",", ", "))
	}
	switch networkMode(c) {
	case sandbox.NetworkHost:
		return "Network access is shared with the host (its loopback services and networks are reachable)."
	case sandbox.NetworkBlocked:
		return "Network access is blocked."
	case sandbox.NetworkAllowList:
		s := fmt.Sprintf("Network access is limited to these address ranges: %s; connections elsewhere are refused, and DNS does not resolve inside the sandbox.", strings.ReplaceAll(c.NetworkAllowList, ",", ", "))
		if proxy != "" {
			s += " " + proxy
		}
		return s
	case sandbox.NetworkDomainAllowList:
		return fmt.Sprintf("Network access is limited to these domains: %s (*.name covers the names below name, not name itself). "+
			"Connections go through the proxy at %s that HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name; other names, IP addresses and direct connections are refused, and DNS does not resolve inside the sandbox.",
			strings.ReplaceAll(c.DomainAllowList, ",", ", "), egressProxyAddr)
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
	// Resolver is where DNS queries to sandboxDNS go.
	Resolver string `json:"resolver,omitempty"`
	// Uplink names the network namespace (a file) where the link ends;
	// empty for this host's. Only tests set it (netTestHooks).
	Uplink string `json:"uplink,omitempty"`
	// HostNets are the networks the uplink sits on (its addresses'
	// prefixes and its on-link routes), read at each attach: refused in
	// the public mode (uplink.hostNets).
	HostNets []netip.Prefix `json:"hostNets,omitempty"`
}

// netTestHooks let tests give sandboxes an uplink namespace of their own
// (the "internet" they build) and a resolver in it; set only through
// export_test.go.
type netTestHooks struct {
	Uplink   string
	Resolver netip.Addr
}

// sandboxDNS is the resolver a sandbox with a link of its own is given
// (its resolv.conf): the address of link 0, which is never a sandbox's,
// so that it stays the same whatever link the sandbox gets. The firewall
// forwards queries to it to the host's resolver in the public mode, and
// refuses them in the others.
var sandboxDNS = netip.MustParseAddr("10.231.0.1")
