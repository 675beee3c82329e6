package egress

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Interceptor takes over the connections to some hosts instead of the
// proxy's plain relay: for a sandbox's secrets, the substituting proxy of
// package internal/secretproxy, whose *Proxy satisfies it.
type Interceptor interface {
	// Intercepts reports whether a CONNECT (HTTP or SOCKS5) to host, a
	// canonical name, goes to ServeTLS instead of a tunnel.
	Intercepts(host string) bool
	// InterceptsHTTP reports whether the absolute-URI requests to host
	// are Rewritten fully (body included).
	InterceptsHTTP(host string) bool
	// Rewrite rewrites an absolute-URI request to host before it goes
	// upstream (tls is false: it is cleartext).
	Rewrite(req *http.Request, host string, tls bool) error
	// ServeTLS serves conn, whose next bytes are a TLS ClientHello for
	// host:port, until it ends; it closes conn.
	ServeTLS(ctx context.Context, conn net.Conn, host string, port uint16)
}

// interceptorBox holds an Interceptor in an atomic.Pointer.
type interceptorBox struct{ ic Interceptor }

// interceptors is the Proxy's current Interceptor (nil: none).
type interceptors struct {
	p atomic.Pointer[interceptorBox]
}

func (i *interceptors) load() Interceptor {
	if b := i.p.Load(); b != nil {
		return b.ic
	}
	return nil
}

// SetIntercept replaces the interceptor (nil: none), atomically;
// connections already intercepted stay with the one that took them.
func (p *Proxy) SetIntercept(ic Interceptor) {
	if ic == nil {
		p.icpt.p.Store(nil)
		return
	}
	p.icpt.p.Store(&interceptorBox{ic})
}

// Dial connects to host:port as a CONNECT to it would: the name must be
// on the allow list, it is resolved by the proxy's resolver, and only
// public addresses are reached (unless Config.AllowNonPublic). A refusal
// is logged. For an Interceptor's upstream connections.
func (p *Proxy) Dial(ctx context.Context, host string, port uint16) (net.Conn, error) {
	c, _, f := p.open(ctx, "intercept", host, port)
	if f != nil {
		return nil, f
	}
	return c, nil
}

// SplitHostPort splits "host:port" (port required, 1–65535); host may
// be an IPv6 literal in brackets.
func SplitHostPort(hostport string) (string, uint16, error) { return splitHostPort(hostport) }

// ServerName returns the server name (SNI) of the TLS ClientHello at the
// start of hello, the body of a client's first handshake record (after
// its 5-byte record header), or "" when it names none.
func ServerName(hello []byte) string { return serverName(hello) }

// intercept hands the client of s to the interceptor, after accept has
// told it that its tunnel to host:port is open, when the interceptor
// takes host and policy admits it; it reports whether it did. The client
// conn keeps the bytes br holds.
func (p *Proxy) intercept(s *session, br *bufio.Reader, host string, port uint16, accept func() error) bool {
	ic := p.icpt.load()
	if ic == nil || port == 0 {
		return false
	}
	name, f := p.admitName(host)
	if f != nil || !ic.Intercepts(name) {
		return false // refused: the tunnel's path refuses it again and logs why
	}
	if accept() != nil {
		return true
	}
	_ = s.client.SetDeadline(time.Time{})
	ic.ServeTLS(p.ctx, &bufferedConn{Conn: s.client, r: br}, name, port)
	return true
}

// rewrite lets the interceptor rewrite an absolute-URI request to host:
// fully when it intercepts host's cleartext HTTP; otherwise its head
// only (so that placeholders sent in cleartext are reported), without
// touching its body.
func (p *Proxy) rewrite(req *http.Request, host string) error {
	ic := p.icpt.load()
	if ic == nil {
		return nil
	}
	name, err := canonicalName(host)
	if err != nil {
		name = host
	}
	if ic.InterceptsHTTP(name) {
		return ic.Rewrite(req, name, false)
	}
	head := *req
	head.Body, head.ContentLength = http.NoBody, 0
	return ic.Rewrite(&head, name, false)
}

// bufferedConn is a connection whose first bytes are in r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
