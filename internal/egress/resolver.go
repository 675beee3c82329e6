package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// Resolver resolves host names to addresses. *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// StaticResolver answers from a fixed table, then from Fallback: names a
// test makes up, or a hosts file of the proxy's own. Names in Hosts are
// matched without regard to case or a trailing dot.
type StaticResolver struct {
	Hosts    map[string][]netip.Addr
	Fallback Resolver // nil: names not in Hosts do not resolve
}

// LookupNetIP returns the addresses of host, of the family network asks
// for ("ip", "ip4" or "ip6").
func (r *StaticResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	want := strings.ToLower(strings.TrimSuffix(host, "."))
	for name, addrs := range r.Hosts {
		if strings.ToLower(strings.TrimSuffix(name, ".")) != want {
			continue
		}
		var out []netip.Addr
		for _, a := range addrs {
			if network == "ip" || network == "ip4" && a.Unmap().Is4() || network == "ip6" && a.Is6() && !a.Is4In6() {
				out = append(out, a)
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	if r.Fallback != nil {
		return r.Fallback.LookupNetIP(ctx, network, host)
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
