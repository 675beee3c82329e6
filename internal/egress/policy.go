package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// SOCKS5 reply codes (RFC 1928 §6).
const (
	socksOK             = 0x00
	socksFailure        = 0x01
	socksNotAllowed     = 0x02
	socksNetUnreachable = 0x03
	socksHostUnreach    = 0x04
	socksRefused        = 0x05
	socksCmdUnsupported = 0x07
	socksAddrUnsupp     = 0x08
)

// failure is why the proxy does not take a client where it asked: a
// refusal by policy (logged), or a destination it could not reach.
type failure struct {
	status int  // HTTP status to answer
	socks  byte // SOCKS5 reply code to answer
	reason string
	policy bool
}

func (f *failure) Error() string { return f.reason }

// refused returns a policy refusal answered with 403 and SOCKS5 0x02.
func refused(format string, a ...any) *failure {
	return &failure{status: http.StatusForbidden, socks: socksNotAllowed, reason: fmt.Sprintf(format, a...), policy: true}
}

// fail logs f when it is a policy refusal of a request for host:port
// made with proto, and returns it.
func (p *Proxy) fail(proto, host string, port uint16, f *failure) *failure {
	if f.policy {
		p.refuse(Refusal{Protocol: proto, Host: host, Port: port, Reason: f.reason})
	}
	return f
}

// admitName judges the host a client asked for, as it gave it (no port),
// and returns its canonical name when the allow list has it.
func (p *Proxy) admitName(host string) (string, *failure) {
	name, err := canonicalName(host)
	switch {
	case errors.Is(err, errIPLiteral) || errors.Is(err, errNonASCII):
		return "", refused("%s is %v", printable(host), err)
	case err != nil:
		f := refused("%q is not a valid host name: %v", printable(host), err)
		f.status = http.StatusBadRequest
		return "", f
	case !p.allow.Load().allows(name):
		return "", refused("%s is not on the sandbox's domain allow list", name)
	}
	return name, nil
}

// open judges host (as the client gave it) and connects to port on one of
// the addresses it resolves to that policy permits. A failure is logged
// when it is a refusal.
func (p *Proxy) open(ctx context.Context, proto, host string, port uint16) (net.Conn, string, *failure) {
	if port == 0 {
		return nil, "", p.fail(proto, host, port, refused("port 0 is not a destination"))
	}
	name, f := p.admitName(host)
	if f != nil {
		return nil, "", p.fail(proto, host, port, f)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", name)
	if err != nil || len(addrs) == 0 {
		return nil, name, &failure{status: http.StatusBadGateway, socks: socksHostUnreach, reason: "cannot resolve " + name + ": " + dnsReason(err)}
	}
	permitted, f := p.permitted(name, addrs)
	if f != nil {
		return nil, name, p.fail(proto, host, port, f)
	}
	c, err := dialFirst(ctx, permitted, port)
	if err != nil {
		return nil, name, dialFailure(name, err)
	}
	return c, name, nil
}

// permitted returns the addresses of addrs (those of name) that policy
// lets a sandbox reach, or a refusal when there is none.
func (p *Proxy) permitted(name string, addrs []netip.Addr) ([]netip.Addr, *failure) {
	if p.cfg.AllowNonPublic {
		return addrs, nil
	}
	var ok []netip.Addr
	var first, what string
	for _, a := range addrs {
		w := classify(a)
		if w == "" && p.host.has(a) {
			w = "an address of this host"
		}
		if w == "" {
			ok = append(ok, a)
		} else if first == "" {
			first, what = a.String(), w
		}
	}
	if len(ok) == 0 {
		return nil, refused("%s resolves only to non-public addresses (%s is %s): an allowed name may not lead into this host or its networks", name, first, what)
	}
	return ok, nil
}

// dialFirst connects to port on the first of addrs that answers, giving
// each a share of ctx's time (2s at least).
func dialFirst(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var err error
	for i, a := range addrs {
		share := 2 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			share = max(time.Until(dl)/time.Duration(len(addrs)-i), share)
		}
		d := net.Dialer{Timeout: share, KeepAlive: 30 * time.Second}
		var c net.Conn
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// dialFailure describes err, the last error connecting to name.
func dialFailure(name string, err error) *failure {
	f := &failure{status: http.StatusBadGateway, socks: socksFailure, reason: "cannot connect to " + name + ": " + err.Error()}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		f.socks = socksRefused
	case errors.Is(err, syscall.ENETUNREACH):
		f.socks = socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		f.socks = socksHostUnreach
	case errors.As(err, &ne) && ne.Timeout():
		f.status, f.socks = http.StatusGatewayTimeout, socksHostUnreach
	}
	return f
}

// dnsReason describes a resolution failure without naming the host's own
// resolver.
func dnsReason(err error) string {
	var de *net.DNSError
	switch {
	case err == nil:
		return "no address"
	case errors.As(err, &de) && de.IsNotFound:
		return "no such host"
	case errors.As(err, &de) && de.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "the lookup timed out"
	}
	return "the lookup failed"
}

// splitHostPort splits "host:port" (port required, 1–65535); host may be
// an IPv6 literal in brackets.
func splitHostPort(hostport string) (string, uint16, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, uint16(n), nil
}
