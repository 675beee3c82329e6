package secretproxy

import (
	"context"
	"net"
	"net/netip"
)

// ServeTransparent serves conn, redirected by a firewall from its original
// destination orig: a TLS ClientHello whose server name Intercepts is
// served by ServeTLS (port orig.Port), a cleartext request whose Host
// InterceptsHTTP by ServeHTTP; anything else is relayed unchanged to orig
// over a connection from passThrough. It closes conn when done.
func (p *Proxy) ServeTransparent(ctx context.Context, conn net.Conn, orig netip.AddrPort, passThrough func(context.Context) (net.Conn, error)) {
	conn.Close()
}
