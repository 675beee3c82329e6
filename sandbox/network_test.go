package sandbox_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestParseAllowList: the one parser of networkAllowList: bare addresses
// are /32 or /128, duplicates and empty items dropped in the order given,
// and every refusal says why.
func TestParseAllowList(t *testing.T) {
	var eleven []string
	for i := range 11 {
		eleven = append(eleven, fmt.Sprintf("203.0.113.%d", i))
	}
	for _, c := range []struct {
		in, want, says string
	}{
		{in: "", want: ""},
		{in: " , ,", want: ""},
		{in: "203.0.113.0/24", want: "203.0.113.0/24"},
		{in: "203.0.113.7", want: "203.0.113.7/32"},
		{in: "2001:DB8::1", want: "2001:db8::1/128"},
		{in: " 203.0.113.0/24,2001:db8::/32, 203.0.113.0/24,,198.51.100.7", want: "203.0.113.0/24,2001:db8::/32,198.51.100.7/32"},
		{in: "10.0.0.0/8,192.168.0.0/16", want: "10.0.0.0/8,192.168.0.0/16"},
		{in: strings.Join(eleven[:10], ","), want: strings.Join(eleven[:10], "/32,") + "/32"},
		{in: strings.Join(append(eleven[:10:10], eleven[0]), ","), want: strings.Join(eleven[:10], "/32,") + "/32"},
		{in: strings.Join(eleven, ","), says: "more than 10 entries"},
		{in: "203.0.113.0/33", says: "not a CIDR"},
		{in: "example.com", says: "DomainAllowList"},
		{in: "garbage!", says: "not a CIDR"},
		{in: "203.0.113.1/24", says: "did you mean 203.0.113.0/24"},
		{in: "169.254.169.254", says: "link-local"},
		{in: "127.0.0.0/8", says: "loopback"},
		{in: "::1", says: "loopback"},
		{in: "224.0.0.1", says: "multicast"},
		{in: "168.63.129.16", says: "Azure"},
		{in: "::ffff:203.0.113.0/120", says: "IPv4-mapped"},
		{in: "fe80::1%eth0", says: "zone"},
	} {
		got, err := sandbox.ParseAllowList(c.in)
		if c.says != "" {
			if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("ParseAllowList(%.60q) = %v, %v; want ErrInvalidArgument saying %q", c.in, got, err, c.says)
			}
			continue
		}
		p := sandbox.NetworkPolicy{Allow: got}
		if err != nil || p.AllowListString() != c.want || (c.want == "") != (got == nil) {
			t.Errorf("ParseAllowList(%.60q) = %q (%v), %v; want %q", c.in, p.AllowListString(), got, err, c.want)
		}
	}
}

// TestParseDomainAllowList: the one parser of domainAllowList, the one
// the egress proxy's patterns come from.
func TestParseDomainAllowList(t *testing.T) {
	var many []string
	for i := 0; i <= 100; i++ {
		many = append(many, fmt.Sprintf("h%d.example", i))
	}
	for _, c := range []struct {
		in, want, says string
	}{
		{in: "", want: ""},
		{in: " , ", want: ""},
		{in: " Example.COM. ,*.Example.org,example.com", want: "example.com,*.example.org"},
		{in: "*.example.com,example.com", want: "*.example.com,example.com"},
		{in: strings.Join(many[:100], ","), want: strings.Join(many[:100], ",")},
		{in: strings.Join(many, ","), says: "more than 100 entries"},
		{in: "example.com,bad domain.com", says: "not allowed in a name"},
		{in: "10.0.0.0/8", says: "CIDR"},
		{in: "192.168.1.1", says: "IP address"},
		{in: "https://example.com", says: "not a URL"},
		{in: "example.com:443", says: "without a port"},
		{in: "*", says: "bare *"},
		{in: "a.*.example.com", says: "whole first label"},
		{in: "bücher.de", says: "punycode"},
		{in: strings.Repeat("a", 64) + ".com", says: "63"},
	} {
		got, err := sandbox.ParseDomainAllowList(c.in)
		if c.says != "" {
			if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("ParseDomainAllowList(%.60q) = %v, %v; want ErrInvalidArgument saying %q", c.in, got, err, c.says)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != c.want || (c.want == "") != (got == nil) {
			t.Errorf("ParseDomainAllowList(%.60q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestParseNetworkPolicy: Daytona's wire form gives one mode, and Wire
// gives the wire form back.
func TestParseNetworkPolicy(t *testing.T) {
	for _, c := range []struct {
		blockAll       bool
		allow, domains string
		want           string // NetworkPolicy.String; "" when refused
		says           string
	}{
		{want: "public"},
		{blockAll: true, want: "blocked"},
		{allow: "203.0.113.7", want: "allowList 203.0.113.7/32"},
		{domains: "pypi.org", want: "domainAllowList pypi.org"},
		{allow: "203.0.113.0/24", domains: "pypi.org", want: "allowList 203.0.113.0/24 pypi.org"},
		{blockAll: true, allow: "203.0.113.0/24", says: "two network modes"},
		{blockAll: true, domains: "pypi.org", says: "two network modes"},
		{allow: " , ", says: "lists no CIDR"},
		{domains: ",", says: "names no domain"},
		{allow: "nonsense", says: "networkAllowList"},
		{domains: "a b", says: "domainAllowList"},
	} {
		p, err := sandbox.ParseNetworkPolicy(c.blockAll, c.allow, c.domains)
		if c.says != "" {
			if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%+v: %v, %v; want ErrInvalidArgument saying %q", c, p, err, c.says)
			}
			continue
		}
		if err != nil || p.String() != c.want {
			t.Errorf("%+v: %v, %v; want %s", c, p, err, c.want)
			continue
		}
		b, a, d := p.Wire()
		if again, err := sandbox.ParseNetworkPolicy(b, a, d); err != nil || !again.Equal(p) {
			t.Errorf("%+v: wire form %v %q %q reads back as %v, %v", c, b, a, d, again, err)
		}
		if canon, err := p.Canonical(); err != nil || !canon.Equal(p) {
			t.Errorf("%+v: Canonical of a parsed policy: %v, %v", c, canon, err)
		}
	}
}

// TestNetworkPolicyCanonical: the one validator of a typed policy (what
// every engine calls) puts it in the parsers' canonical form and refuses
// what they refuse, naming the field.
func TestNetworkPolicyCanonical(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, c := range []struct {
		p    sandbox.NetworkPolicy
		want string
		says string
	}{
		{p: sandbox.NetworkPolicy{}, want: "public"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}, want: "host"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{pfx("203.0.113.0/24"), pfx("203.0.113.0/24")}, Domains: []string{"PyPI.org.", "pypi.org"}},
			want: "allowList 203.0.113.0/24 pypi.org"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList}, says: "lists no CIDR"},
		{p: sandbox.NetworkPolicy{Allow: []netip.Prefix{pfx("203.0.113.0/24")}}, says: "takes no Allow or Domains"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkBlocked, Domains: []string{"pypi.org"}}, says: "NetworkBlockAll"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost, Domains: []string{"pypi.org"}}, says: "HostNetwork"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkDomainAllowList, Domains: []string{"pypi.org"}}, says: "set Mode allowList"},
		{p: sandbox.NetworkPolicy{Mode: "open"}, says: `Mode "open" is not a network mode`},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{{}}}, says: "NetworkPolicy.Allow"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []netip.Prefix{pfx("203.0.113.1/24")}}, says: "did you mean 203.0.113.0/24"},
		{p: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Domains: []string{"*"}}, says: "NetworkPolicy.Domains"},
	} {
		got, err := c.p.Canonical()
		if c.says != "" {
			if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) || c.p.Validate() == nil {
				t.Errorf("%+v: %v, %v; want ErrInvalidArgument saying %q", c.p, got, err, c.says)
			}
			continue
		}
		if err != nil || got.String() != c.want || c.p.Validate() != nil {
			t.Errorf("%+v: %v, %v; want %s", c.p, got, err, c.want)
		}
	}
}

// TestNetworkPolicyInfo: Info tells the policy with the mode a reader
// sees, domainAllowList for names alone.
func TestNetworkPolicyInfo(t *testing.T) {
	p, err := sandbox.ParseNetworkPolicy(false, "203.0.113.7", "pypi.org")
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Info(); n.Mode != sandbox.NetworkAllowList || strings.Join(n.AllowList, ",") != "203.0.113.7/32" || strings.Join(n.DomainAllowList, ",") != "pypi.org" {
		t.Errorf("info %+v", n)
	}
	p.Allow = nil
	if n := p.Info(); n.Mode != sandbox.NetworkDomainAllowList || n.AllowList != nil {
		t.Errorf("info of names alone %+v", n)
	}
	if n := (sandbox.NetworkPolicy{}).Info(); n.Mode != sandbox.NetworkPublic {
		t.Errorf("info of the zero policy %+v", n)
	}
}
