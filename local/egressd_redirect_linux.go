package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/egress"
)

// The shared egress proxy's side of the secrets' redirect mode
// (redirect_linux.go): for a sandbox it serves ("serve", with its
// secrets) the request "redirect" hands it the end of the socketpair of
// the sandbox's netsock process and the listening sockets on :3129 in the
// sandbox's namespace. Each redirected connection is served by the
// sandbox's secretproxy.Proxy.ServeTransparent; the upstream connections
// (pass-through to the original destination, and the intercepted hosts'
// connections, resolved by the proxy's resolver) use sockets of the
// netsock process, so they leave from the sandbox's namespace through its
// firewall.

// redirectServing is the redirect mode of one sandbox's egressBox.
type redirectServing struct {
	d        *netsockDialer
	lns      []net.Listener
	resolver egress.Resolver
	ctx      context.Context
	cancel   context.CancelFunc
}

// close stops the listeners, ends the connections and the socketpair
// (the netsock process exits).
func (r *redirectServing) close() {
	r.cancel()
	for _, ln := range r.lns {
		ln.Close()
	}
	r.d.close()
}

// serveRedirect starts the redirect mode of the served sandbox req.ID
// with the socketpair end files[0] and the listening sockets files[1:],
// in place of any earlier one.
func (s *egressServer) serveRedirect(req *egressRequest, files []*os.File) error {
	if len(files) < 2 {
		return errors.New("redirect: want the socket helper's end and the listening sockets")
	}
	d, err := newNetsockDialer(files[0])
	if err != nil {
		return err
	}
	r := &redirectServing{d: d, resolver: net.DefaultResolver}
	if len(req.Hosts) > 0 {
		r.resolver = &egress.StaticResolver{Hosts: req.Hosts}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for _, f := range files[1:] {
		ln, err := net.FileListener(f)
		if err != nil {
			r.close()
			return fmt.Errorf("redirect: %w", err)
		}
		r.lns = append(r.lns, ln)
	}
	s.mu.Lock()
	b := s.boxes[req.ID]
	if b == nil || b.sp == nil {
		s.mu.Unlock()
		r.close()
		return fmt.Errorf("sandbox %q is not served with secrets", req.ID)
	}
	old := b.rd.Swap(r)
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
	for _, ln := range r.lns {
		go s.acceptRedirected(b, r, ln)
	}
	return nil
}

// acceptRedirected serves the connections redirected to ln.
func (s *egressServer) acceptRedirected(b *egressBox, r *redirectServing, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go s.serveRedirected(b, r, c.(*net.TCPConn))
	}
}

// serveRedirected serves one redirected connection: refused when it has
// no original destination or was made to the listener itself.
func (s *egressServer) serveRedirected(b *egressBox, r *redirectServing, c *net.TCPConn) {
	orig, err := originalDst(c)
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	if err != nil || orig.Addr().Unmap() == local.Addr().Unmap() && orig.Port() == local.Port() {
		c.Close()
		return
	}
	s.mu.Lock()
	sp := b.sp
	s.mu.Unlock()
	if sp == nil {
		c.Close()
		return
	}
	sp.ServeTransparent(r.ctx, c, orig, func(ctx context.Context) (net.Conn, error) { return r.d.dial(ctx, orig) })
}

// dialHost connects to host:port (an intercepted host), resolved by the
// proxy's resolver, from the sandbox's namespace.
func (r *redirectServing) dialHost(ctx context.Context, host string, port uint16) (net.Conn, error) {
	addrs, err := r.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	var last error
	for _, a := range addrs {
		c, err := r.d.dial(ctx, netip.AddrPortFrom(a, port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// upstream is the Dial of the sandbox's secretproxy.Proxy: through the
// netsock process in the redirect mode, else through the egress proxy
// (the domain allow list).
func (b *egressBox) upstream(ctx context.Context, host string, port uint16) (net.Conn, error) {
	if r := b.rd.Load(); r != nil {
		return r.dialHost(ctx, host, port)
	}
	return b.p.Dial(ctx, host, port)
}

// soOriginalDst is SO_ORIGINAL_DST (SOL_IP) and IP6T_SO_ORIGINAL_DST
// (SOL_IPV6): the destination a connection had before a NAT redirect.
const soOriginalDst = 80

// originalDst returns the destination that the redirected connection c
// was made to, from conntrack.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	v6 := c.LocalAddr().(*net.TCPAddr).IP.To4() == nil
	var out netip.AddrPort
	var oerr error
	err = rc.Control(func(fd uintptr) {
		var buf [unix.SizeofSockaddrInet6]byte
		n := uint32(len(buf))
		level := unix.SOL_IP
		if v6 {
			level = unix.SOL_IPV6
		}
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), soOriginalDst, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e != 0 {
			oerr = e
			return
		}
		port := uint16(buf[2])<<8 | uint16(buf[3])
		if v6 {
			out = netip.AddrPortFrom(netip.AddrFrom16([16]byte(buf[8:24])), port)
		} else {
			out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(buf[4:8])), port)
		}
	})
	if err == nil {
		err = oerr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}
