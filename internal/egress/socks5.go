package egress

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
)

// SOCKS5 (RFC 1928) field values.
const (
	socks5Version  = 5
	socksNoAuth    = 0x00
	socksNoMethods = 0xff
	socksConnect   = 0x01
	socksIPv4      = 0x01
	socksDomain    = 0x03
	socksIPv6      = 0x04
)

// serveSOCKS5 serves a SOCKS5 client: no authentication, CONNECT to a
// domain name (an IP address is refused, as is every other command).
func (p *Proxy) serveSOCKS5(s *session, br *bufio.Reader) {
	c := s.client
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	if !hasByte(methods, socksNoAuth) {
		p.refuse(Refusal{Protocol: "socks5", Reason: "the client offers no method the proxy has (it needs no authentication)"})
		_, _ = c.Write([]byte{socks5Version, socksNoMethods})
		return
	}
	if _, err := c.Write([]byte{socks5Version, socksNoAuth}); err != nil {
		return
	}
	var req [4]byte // version, command, reserved, address type
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return
	}
	if req[0] != socks5Version {
		p.refuse(Refusal{Protocol: "socks5", Reason: fmt.Sprintf("malformed request (version %d)", req[0])})
		socksReply(c, socksFailure)
		return
	}
	host, ok := readSOCKSAddr(br, req[3])
	if !ok {
		p.refuse(Refusal{Protocol: "socks5", Reason: fmt.Sprintf("malformed request (address type %d)", req[3])})
		socksReply(c, socksAddrUnsupp)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	port := uint16(pb[0])<<8 | uint16(pb[1])
	if req[1] != socksConnect {
		p.refuse(Refusal{Protocol: "socks5", Host: host, Port: port, Reason: fmt.Sprintf("SOCKS5 command %d is not supported: only CONNECT (no BIND, no UDP)", req[1])})
		socksReply(c, socksCmdUnsupported)
		return
	}
	if p.intercept(s, br, host, port, func() error { return socksReply(c, socksOK) }) {
		return
	}
	up, name, f := p.open(p.ctx, "socks5", host, port)
	if f != nil {
		socksReply(c, f.socks)
		return
	}
	if err := socksReply(c, socksOK); err != nil {
		up.Close()
		return
	}
	p.tunnel(s, br, up, name, port)
}

// readSOCKSAddr reads the destination address of type atyp: the name, or
// an IP address as text (which policy then refuses).
func readSOCKSAddr(br *bufio.Reader, atyp byte) (string, bool) {
	var n int
	switch atyp {
	case socksIPv4:
		n = 4
	case socksIPv6:
		n = 16
	case socksDomain:
		b, err := br.ReadByte()
		if err != nil || b == 0 {
			return "", false
		}
		n = int(b)
	default:
		return "", false
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", false
	}
	if atyp == socksDomain {
		return string(b), true
	}
	a, _ := netip.AddrFromSlice(b)
	return a.String(), true
}

// socksReply sends a reply with code rep and an empty bound address.
func socksReply(w io.Writer, rep byte) error {
	_, err := w.Write([]byte{socks5Version, rep, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
