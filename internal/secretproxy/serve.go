package secretproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// splitHostPort splits "host:port" (port 1–65535).
var splitHostPort = egress.SplitHostPort

// handshakeTimeout bounds a client's TLS handshake with the proxy.
const handshakeTimeout = 10 * time.Second

// connInfo is what the proxy knows of a client connection: the host and
// port it goes to, and whether it is TLS.
type connInfo struct {
	host string // canonical
	port uint16
	tls  bool
}

func (ci connInfo) protocol() string {
	if ci.tls {
		return "https"
	}
	return "http"
}

type infoKey struct{}

// servedConn is a client connection handed to the proxy's HTTP server;
// done is closed when it is closed (by the server, by a hijacker at the
// end of an upgrade, or by Close).
type servedConn struct {
	net.Conn
	info connInfo
	once sync.Once
	done chan struct{}
}

func (c *servedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// connContext gives each request the connInfo of its connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*servedConn); ok {
		return context.WithValue(ctx, infoKey{}, sc.info)
	}
	return ctx
}

// chanListener is the listener of the proxy's HTTP server: it accepts
// the connections that ServeTLS and ServeHTTP hand it.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "secretproxy", Net: "unix"} }

// ServeTLS serves conn, a client connection whose next bytes are a TLS
// ClientHello for host, as host: it terminates TLS with a certificate for
// host, substitutes, and forwards each request to host:port over
// verified TLS. It returns once conn has ended, closed. A ClientHello
// that names another server than host (SNI) is refused (an Event) and
// conn closed; so is a handshake not done within 10 seconds.
func (p *Proxy) ServeTLS(ctx context.Context, conn net.Conn, host string, port uint16) {
	name, ok := p.connHost(conn, "https", host, port)
	if !ok {
		return
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				if sni, err := hostname.Canonical(hello.ServerName); err != nil || sni != name {
					p.event(Event{Protocol: "https", Host: name, Port: port, Reason: "the TLS server name " + hostname.Printable(hello.ServerName) + " is not the connection's host " + name})
					return nil, errors.New("server name not the connection's host")
				}
			}
			return p.cfg.CA.Certificate(name)
		},
	}
	tc := tls.Server(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	err := tc.HandshakeContext(hctx)
	cancel()
	stop()
	if err != nil {
		conn.Close()
		return
	}
	p.serveConn(ctx, tc, connInfo{host: name, port: port, tls: true})
}

// ServeHTTP serves conn, a cleartext HTTP/1.1 client connection to
// host:port: only secrets with AllowHTTP are replaced. It returns once
// conn has ended, closed.
func (p *Proxy) ServeHTTP(ctx context.Context, conn net.Conn, host string, port uint16) {
	if name, ok := p.connHost(conn, "http", host, port); ok {
		p.serveConn(ctx, conn, connInfo{host: name, port: port})
	}
}

// connHost returns the canonical name of host, the host of conn, or
// reports that it is not one and closes conn.
func (p *Proxy) connHost(conn net.Conn, proto, host string, port uint16) (string, bool) {
	name, err := hostname.Canonical(host)
	if err != nil {
		p.event(Event{Protocol: proto, Host: host, Port: port, Reason: "not a host name: " + err.Error()})
		conn.Close()
		return "", false
	}
	return name, true
}

// serveConn hands conn to the proxy's HTTP server and waits until it is
// closed, or ctx or the proxy ends (it then closes it).
func (p *Proxy) serveConn(ctx context.Context, conn net.Conn, info connInfo) {
	sc := &servedConn{Conn: conn, info: info, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		conn.Close()
		return
	}
	p.serving[sc] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.serving, sc)
		p.mu.Unlock()
	}()
	select {
	case p.ln.ch <- sc:
	case <-ctx.Done():
		sc.Close()
		return
	case <-p.ctx.Done():
		sc.Close()
		return
	}
	select {
	case <-sc.done:
	case <-ctx.Done():
		sc.Close()
	case <-p.ctx.Done():
		sc.Close()
	}
}

// handle serves one request of a client connection: its Host must name
// the connection's host (421 otherwise); its placeholders are replaced
// (Rewrite) and it goes upstream.
func (p *Proxy) handle(w http.ResponseWriter, r *http.Request) {
	info, ok := r.Context().Value(infoKey{}).(connInfo)
	if !ok {
		http.Error(w, "secretproxy: a connection the proxy did not accept", http.StatusInternalServerError)
		return
	}
	reqHost := r.Host
	if h, _, err := net.SplitHostPort(reqHost); err == nil {
		reqHost = h
	}
	if name, err := hostname.Canonical(reqHost); err != nil || name != info.host {
		p.event(Event{Protocol: info.protocol(), Host: info.host, Port: info.port, Reason: "a request on the connection to " + info.host + " names the host " + hostname.Printable(reqHost)})
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("secretproxy: this connection goes to %s; the request names %s", info.host, hostname.Printable(reqHost)), http.StatusMisdirectedRequest)
		return
	}
	if err := p.rewrite(r, info.host, info.port, info.tls); err != nil {
		http.Error(w, "secretproxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// route points the outgoing request at the connection's host and port;
// its Host header stays the client's (checked by handle).
func (p *Proxy) route(pr *httputil.ProxyRequest) {
	info := pr.In.Context().Value(infoKey{}).(connInfo)
	pr.Out.URL.Scheme = "http"
	if info.tls {
		pr.Out.URL.Scheme = "https"
	}
	pr.Out.URL.Host = net.JoinHostPort(info.host, strconv.Itoa(int(info.port)))
	pr.Out.Host = pr.In.Host
}

// upstreamError answers 502 when the upstream could not be reached or
// sent no valid response (an untrusted certificate among them). The
// error never holds the request's URL, which may hold a value.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	info, _ := r.Context().Value(infoKey{}).(connInfo)
	reason := "the upstream failed: " + err.Error()
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	p.event(Event{Protocol: info.protocol(), Host: info.host, Port: info.port, Reason: reason})
	http.Error(w, "secretproxy: "+info.host+": "+p.redact(reason), http.StatusBadGateway)
}
