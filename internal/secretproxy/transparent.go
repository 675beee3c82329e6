package secretproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"time"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/goroutine"
	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// Transparent serving: how long a client has to send its first bytes
// before the connection is taken for a server-first protocol and relayed
// (serverFirstWait), how long it has to finish its ClientHello or
// request head (peekTimeout), and how much of it is read to tell
// (peekSize: a ClientHello record is at most 16 KiB plus its header).
const (
	serverFirstWait = 300 * time.Millisecond
	peekTimeout     = 5 * time.Second
	peekSize        = 16<<10 + 5
)

// ServeTransparent serves conn, redirected by a firewall from its original
// destination orig: a TLS ClientHello whose server name Intercepts is
// served by ServeTLS (port orig.Port), a cleartext request whose Host
// InterceptsHTTP by ServeHTTP; anything else is relayed unchanged to orig
// over a connection from passThrough. It closes conn when done.
//
// A client that sends nothing for 300 ms is taken for a server-first
// protocol (SMTP, SSH…) and relayed. A cleartext request to a host that
// is not served (a secret that allows TLS only, or none) is relayed as
// it is, with an Event for each placeholder in its head.
func (p *Proxy) ServeTransparent(ctx context.Context, conn net.Conn, orig netip.AddrPort, passThrough func(context.Context) (net.Conn, error)) {
	br := bufio.NewReaderSize(conn, peekSize)
	_ = conn.SetReadDeadline(time.Now().Add(serverFirstWait))
	first, err := br.Peek(1)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(peekTimeout))
	bc := &bufferedConn{Conn: conn, r: br}
	switch {
	case len(first) == 0: // server first
	case first[0] == 0x16: // a TLS handshake record
		if sni := clientHelloName(br); sni != "" && p.Intercepts(sni) {
			_ = conn.SetReadDeadline(time.Time{})
			p.ServeTLS(ctx, bc, sni, orig.Port())
			return
		}
	default:
		if host, head := requestHost(br); host != "" {
			if p.InterceptsHTTP(host) {
				_ = conn.SetReadDeadline(time.Time{})
				p.ServeHTTP(ctx, bc, host, orig.Port())
				return
			}
			p.reportHead(head, host, orig.Port())
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	p.relay(ctx, bc, passThrough)
}

// clientHelloName returns the server name of the ClientHello br starts
// with, or "".
func clientHelloName(br *bufio.Reader) string {
	h, err := br.Peek(5)
	if err != nil {
		return ""
	}
	n := min(5+(int(h[3])<<8|int(h[4])), br.Size())
	rec, err := br.Peek(n)
	if err != nil {
		return ""
	}
	return egress.ServerName(rec[5:])
}

// requestHost returns the Host of the HTTP request head br starts with,
// and the head, or "" when it is not one.
func requestHost(br *bufio.Reader) (string, []byte) {
	for {
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			head := b[:i+4]
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
			if _, err := tp.ReadLine(); err != nil {
				return "", nil
			}
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return "", nil
			}
			host := h.Get("Host")
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			return host, head
		}
		if len(b) >= br.Size() {
			return "", nil
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return "", nil
		}
	}
}

// reportHead reports the placeholders in a cleartext request head that
// goes to host unchanged.
func (p *Proxy) reportHead(head []byte, host string, port uint16) {
	name, err := hostname.Canonical(host)
	if err != nil {
		name = host
	}
	s := &subst{p: p, t: p.table.Load(), host: name, port: port}
	for i := range s.t.secrets {
		if bytes.Contains(head, []byte(s.t.secrets[i].Placeholder)) {
			s.report(&s.t.secrets[i])
		}
	}
}

// relay copies between conn and a connection from passThrough, both
// ways, keeping half-closes, until both directions end.
func (p *Proxy) relay(ctx context.Context, conn net.Conn, passThrough func(context.Context) (net.Conn, error)) {
	defer conn.Close()
	up, err := passThrough(ctx)
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close(); up.Close() })
	defer stop()
	stopP := context.AfterFunc(p.ctx, func() { conn.Close(); up.Close() })
	defer stopP()
	var g goroutine.Group
	g.Go(func() { copyHalf(up, conn) })
	copyHalf(conn, up)
	_ = g.Wait(context.Background())
}

// copyHalf copies src to dst, then half-closes dst (closes both on an
// error).
func copyHalf(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	dst.Close()
}

// bufferedConn is a connection whose first bytes are in r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection when it can (closes it
// otherwise).
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
