package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// The network policy of a sandbox, as every engine takes it: one type,
// one parser of the comma-separated lists Daytona's API and the CLI
// write, and one validator, so that a list one engine accepts the other
// accepts too, in the same canonical form.

// Caps of a [NetworkPolicy].
const (
	// MaxAllowListEntries is the most prefixes Allow holds: Daytona's
	// cap on networkAllowList, so that a list written for one engine
	// works on the other.
	MaxAllowListEntries = 10
	// MaxDomainAllowListEntries is the most patterns Domains holds.
	// Matching costs the same whatever the length, so the cap is not for
	// speed: it bounds what is stored with a sandbox and shown by Info,
	// and catches a list pasted by mistake (a block list, a hosts file).
	MaxDomainAllowListEntries = 100
)

// NetworkPolicy is the network access a sandbox is created with or
// changed to. The zero value is the default: the public internet only.
// Build one from Daytona's wire form with [ParseNetworkPolicy], or set
// its fields and call [NetworkPolicy.Canonical] (engines do).
type NetworkPolicy struct {
	// Mode is NetworkPublic (the default; "" means it too),
	// NetworkBlocked, NetworkAllowList or NetworkHost. In
	// NetworkAllowList, Allow and Domains list what the sandbox reaches,
	// at least one of them non-empty; the other modes take neither.
	Mode NetworkMode `json:"mode,omitempty"`
	// Allow lists the address ranges the sandbox reaches directly (a
	// single address is a /32 or /128), MaxAllowListEntries at most.
	// Private ranges may be listed; ranges no sandbox ever reaches
	// (loopback, link-local, multicast, reserved, clouds' metadata
	// services: see [NeverReachable]) may not.
	Allow []netip.Prefix `json:"allow,omitempty"`
	// Domains lists the names the sandbox reaches through an egress
	// proxy: "example.com", or "*.example.com" for every name below
	// example.com (not example.com itself); ASCII (punycode for
	// internationalized names), MaxDomainAllowListEntries at most.
	Domains []string `json:"domains,omitempty"`
}

// ParseNetworkPolicy returns the policy of Daytona's wire form: the
// networkBlockAll flag and the comma-separated networkAllowList and
// domainAllowList (see [ParseAllowList] and [ParseDomainAllowList]),
// validated and in canonical form. Both lists empty is the public mode,
// blockAll the blocked one, any list the allow-list mode. The error
// names the wire field that is wrong and matches ErrInvalidArgument.
func ParseNetworkPolicy(blockAll bool, allowList, domainAllowList string) (NetworkPolicy, error) {
	allow, err := ParseAllowList(allowList)
	if err != nil {
		return NetworkPolicy{}, fmt.Errorf("networkAllowList: %w", err)
	}
	domains, err := ParseDomainAllowList(domainAllowList)
	if err != nil {
		return NetworkPolicy{}, fmt.Errorf("domainAllowList: %w", err)
	}
	p := NetworkPolicy{Mode: NetworkPublic, Allow: allow, Domains: domains}
	switch {
	case blockAll && (allow != nil || domains != nil):
		return NetworkPolicy{}, fmt.Errorf("%w: networkBlockAll with an allow list: they are two network modes, and a sandbox has one: networkBlockAll allows nothing, networkAllowList and domainAllowList what they list; set one of them", ErrInvalidArgument)
	case blockAll:
		p.Mode = NetworkBlocked
	case allow != nil || domains != nil:
		p.Mode = NetworkAllowList
	case strings.TrimSpace(allowList) != "" || strings.TrimSpace(domainAllowList) != "":
		return NetworkPolicy{}, fmt.Errorf("%w: networkAllowList %q lists no CIDR and domainAllowList %q names no domain; to block all traffic set networkBlockAll instead, for the default leave both empty", ErrInvalidArgument, allowList, domainAllowList)
	}
	return p, nil
}

// Wire returns p in Daytona's wire form: networkBlockAll and the
// comma-separated networkAllowList and domainAllowList. NetworkHost has
// none (Daytona has no such mode): it reads as the default.
func (p NetworkPolicy) Wire() (blockAll bool, allowList, domainAllowList string) {
	return p.Mode == NetworkBlocked, p.AllowListString(), p.DomainAllowListString()
}

// AllowListString returns Allow comma-separated ("" when empty): what
// [ParseAllowList] reads back to the same list.
func (p NetworkPolicy) AllowListString() string {
	s := make([]string, len(p.Allow))
	for i, a := range p.Allow {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// DomainAllowListString returns Domains comma-separated ("" when empty).
func (p NetworkPolicy) DomainAllowListString() string { return strings.Join(p.Domains, ",") }

// InfoMode returns the mode [NetworkInfo] reports for p:
// NetworkDomainAllowList for an allow list of names only, Mode otherwise
// (NetworkPublic for "").
func (p NetworkPolicy) InfoMode() NetworkMode {
	switch {
	case p.Mode == "":
		return NetworkPublic
	case p.Mode == NetworkAllowList && len(p.Allow) == 0:
		return NetworkDomainAllowList
	}
	return p.Mode
}

// IsZero reports whether p is the zero NetworkPolicy (no policy given).
func (p NetworkPolicy) IsZero() bool {
	return p.Mode == "" && len(p.Allow) == 0 && len(p.Domains) == 0
}

// Equal reports whether p and q are the same policy (their canonical
// forms are equal).
func (p NetworkPolicy) Equal(q NetworkPolicy) bool {
	return p.InfoMode() == q.InfoMode() && p.AllowListString() == q.AllowListString() && p.DomainAllowListString() == q.DomainAllowListString()
}

// Validate returns an error matching ErrInvalidArgument, naming the
// field, when p is not a valid policy.
func (p NetworkPolicy) Validate() error {
	_, err := p.Canonical()
	return err
}

// Canonical returns p validated and in canonical form: Mode set ("" is
// NetworkPublic), Allow and Domains without duplicates in the order
// given (nil when empty), names lower-cased without a trailing dot. The
// error names the field that is wrong and matches ErrInvalidArgument.
func (p NetworkPolicy) Canonical() (NetworkPolicy, error) {
	allow, err := canonicalPrefixes(p.Allow)
	if err != nil {
		return NetworkPolicy{}, fmt.Errorf("NetworkPolicy.Allow: %w", err)
	}
	domains, err := canonicalDomains(p.Domains)
	if err != nil {
		return NetworkPolicy{}, fmt.Errorf("NetworkPolicy.Domains: %w", err)
	}
	out := NetworkPolicy{Mode: p.Mode, Allow: allow, Domains: domains}
	listed := allow != nil || domains != nil
	switch p.Mode {
	case "", NetworkPublic, NetworkBlocked, NetworkHost:
		if out.Mode == "" {
			out.Mode = NetworkPublic
		}
		if listed {
			return NetworkPolicy{}, fmt.Errorf("%w: NetworkPolicy.Mode %s takes no Allow or Domains: they are two network modes, and a sandbox has one; set Mode %s with the lists, or the mode without them", ErrInvalidArgument, modeName(out.Mode), NetworkAllowList)
		}
	case NetworkAllowList:
		if !listed {
			return NetworkPolicy{}, fmt.Errorf("%w: NetworkPolicy.Mode %s with empty Allow and Domains lists no CIDR and names no domain; to block all traffic set Mode %s instead", ErrInvalidArgument, NetworkAllowList, NetworkBlocked)
		}
	case NetworkDomainAllowList:
		return NetworkPolicy{}, fmt.Errorf("%w: NetworkPolicy.Mode %s is what Info reports for a list of names only; set Mode %s with Domains", ErrInvalidArgument, NetworkDomainAllowList, NetworkAllowList)
	default:
		return NetworkPolicy{}, fmt.Errorf("%w: NetworkPolicy.Mode %q is not a network mode: use %s, %s, %s or %s", ErrInvalidArgument, p.Mode, NetworkPublic, NetworkBlocked, NetworkAllowList, NetworkHost)
	}
	return out, nil
}

// modeName names a mode in errors, with the option that asks for it.
func modeName(m NetworkMode) string {
	switch m {
	case NetworkHost:
		return "host (HostNetwork: the host's network namespace, where no policy applies)"
	case NetworkBlocked:
		return "blocked (NetworkBlockAll)"
	}
	return string(m)
}

// ParseAllowList parses a comma-separated list of CIDRs and addresses, as
// Daytona's networkAllowList and the CLI write them
// ("203.0.113.0/24,2001:db8::/32,198.51.100.7"): a bare address is a /32
// or /128; spaces around entries and empty entries are ignored. It
// returns the canonical list (nil when empty): duplicates dropped, in
// the order given. The error matches ErrInvalidArgument.
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		p, err := parsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %q: %v", ErrInvalidArgument, e, err)
		}
		out = append(out, p)
	}
	return canonicalPrefixes(out)
}

// parsePrefix parses one entry of an allow list.
func parsePrefix(e string) (netip.Prefix, error) {
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return p, errors.New("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32")
		}
		return p, nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil {
		return netip.Prefix{}, errors.New("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32, nor an IP address (names belong in the domain allow list, DomainAllowList)")
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("an address with a zone is not a destination")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// canonicalPrefixes checks each prefix of ps and returns them without
// duplicates (nil when none), MaxAllowListEntries at most.
func canonicalPrefixes(ps []netip.Prefix) ([]netip.Prefix, error) {
	return uniqueEntries(ps, func(p netip.Prefix) (netip.Prefix, error) { return p, checkPrefix(p) },
		MaxAllowListEntries, "(Daytona's cap, kept so that a list works on every engine); cover neighbouring ranges with one shorter prefix")
}

// uniqueEntries returns the canonical forms (canon) of entries, without
// duplicates, in the order given (nil when none), most of them at most: past it,
// the error says tooMany. An error names the entry it is about and
// matches ErrInvalidArgument.
func uniqueEntries[T any, K comparable](entries []T, canon func(T) (K, error), most int, tooMany string) ([]K, error) {
	var out []K
	seen := map[K]bool{}
	for _, e := range entries {
		k, err := canon(e)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %.255q: %v", ErrInvalidArgument, fmt.Sprint(e), err)
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(out) == most {
			return nil, fmt.Errorf("%w: more than %d entries %s", ErrInvalidArgument, most, tooMany)
		}
		out = append(out, k)
	}
	return out, nil
}

// checkPrefix says what is wrong with p as an allow list entry.
func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return errors.New("not a CIDR such as 203.0.113.0/24 or 2001:db8::/32")
	case p.Addr().Zone() != "":
		return errors.New("an address with a zone is not a destination")
	case p.Addr().Is4In6():
		return errors.New("an IPv4-mapped IPv6 range; write the IPv4 range instead")
	case p != p.Masked():
		return fmt.Errorf("has bits set past /%d; did you mean %s?", p.Bits(), p.Masked())
	}
	if what := NeverReachable(p); what != "" {
		return fmt.Errorf("lies in %s, which a sandbox never reaches", what)
	}
	return nil
}

// ParseDomainAllowList parses a comma-separated list of names and
// wildcards, as Daytona's domainAllowList and the CLI write them
// ("pypi.org,*.github.com"). Spaces around entries and empty entries
// are ignored. It returns the canonical list (nil when empty): names
// lower-cased without a trailing dot, duplicates dropped, in the order
// given. It refuses IP addresses and CIDRs, URLs, ports, wildcards
// anywhere but as the whole first label, non-ASCII and malformed names,
// and more than MaxDomainAllowListEntries entries, with an error
// matching ErrInvalidArgument.
func ParseDomainAllowList(s string) ([]string, error) {
	return canonicalDomains(strings.Split(s, ","))
}

// canonicalDomains returns the canonical form of the patterns ds (nil
// when none), blank ones left out.
func canonicalDomains(ds []string) ([]string, error) {
	var nonBlank []string
	for _, e := range ds {
		if e = strings.TrimSpace(e); e != "" {
			nonBlank = append(nonBlank, e)
		}
	}
	return uniqueEntries(nonBlank, func(e string) (string, error) {
		canon, _, err := hostname.ParsePattern(e)
		return canon, err
	}, MaxDomainAllowListEntries, "; allow a parent domain with a wildcard (*.example.com) instead of many of its names")
}

// Info returns the NetworkInfo that tells p: its InfoMode and lists.
func (p NetworkPolicy) Info() *NetworkInfo {
	n := &NetworkInfo{Mode: p.InfoMode(), DomainAllowList: slices.Clone(p.Domains)}
	for _, a := range p.Allow {
		n.AllowList = append(n.AllowList, a.String())
	}
	return n
}

// String returns p in words, as errors show it: its mode and lists.
func (p NetworkPolicy) String() string {
	s := string(p.InfoMode())
	if len(p.Allow) > 0 {
		s += " " + p.AllowListString()
	}
	if len(p.Domains) > 0 {
		s += " " + p.DomainAllowListString()
	}
	return s
}

// BlockedIf returns the blocked policy when block is true, else the zero
// policy (the default for a new sandbox).
func BlockedIf(block bool) NetworkPolicy {
	if block {
		return NetworkPolicy{Mode: NetworkBlocked}
	}
	return NetworkPolicy{}
}
