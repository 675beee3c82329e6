package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
)

// tunnel is a connection from a client to a destination, name:port,
// whose client side is checked while it starts.
type tunnel struct {
	p    *Proxy
	s    *session
	br   *bufio.Reader // the client's, after its handshake
	up   net.Conn
	name string
	port uint16
	down chan struct{} // closed when the destination's bytes stop flowing
	hush atomic.Bool   // the destination's end must leave the client open
}

// tunnel joins the client of s, whose handshake left br (possibly holding
// early bytes), to up, its connection to name:port. The destination's
// bytes flow at once (some protocols speak first); what the client sends
// first is checked: a TLS ClientHello must name name (SNI), HTTP requests
// must all name it; anything else passes.
func (p *Proxy) tunnel(s *session, br *bufio.Reader, up net.Conn, name string, port uint16) {
	if !s.setUpstream(up) {
		return
	}
	_ = s.client.SetDeadline(time.Time{})
	tn := &tunnel{p: p, s: s, br: br, up: up, name: name, port: port, down: make(chan struct{})}
	p.g.Go(func() {
		defer close(tn.down)
		err := copyOnce(s.client, up, &p.bufs)
		switch {
		case tn.hush.Load(): // a refusal is being written to the client
		case err != nil:
			s.close()
		default:
			closeWrite(s.client)
		}
	})
	switch tn.inspect() {
	case pass:
		drain(br, up)
		copyHalf(up, s.client, &p.bufs)
	case done:
		closeWrite(up)
	case stop:
		s.close()
	}
	<-tn.down
}

// verdict is what inspect decides about the rest of a tunnel.
type verdict int

const (
	pass verdict = iota // the rest passes unread
	done                // the client has finished sending
	stop                // refused, or broken: close the tunnel
)

// inspect checks what the client sends into the tunnel: its first bytes;
// while it speaks HTTP, every request; and after a request that may
// switch protocols (an upgrade, a CONNECT), the first bytes that follow,
// whether the switch happened or not.
func (tn *tunnel) inspect() verdict {
	for {
		switch kind, err := tn.classify(); {
		case err != nil:
			return ended(err)
		case kind == tlsHello:
			return tn.checkClientHello()
		case kind == http1:
			if v, switched := tn.checkRequests(); !switched {
				return v
			}
		case kind == http2:
			tn.p.refuse(Refusal{Protocol: "tunnel-http", Host: tn.name, Port: tn.port, Reason: "cleartext HTTP/2 (prior knowledge) cannot be checked; use TLS or HTTP/1.1"})
			return stop
		case kind == longLine:
			tn.p.refuse(Refusal{Protocol: "tunnel-http", Host: tn.name, Port: tn.port, Reason: "a request line longer than " + strconv.Itoa(headBufSize) + " bytes cannot be checked"})
			return stop
		default:
			return pass
		}
	}
}

// What the client's next bytes in a tunnel are.
type streamKind int

const (
	opaque   streamKind = iota // another protocol
	tlsHello                   // a TLS handshake record
	http1                      // an HTTP/1.x request line
	http2                      // the HTTP/2 preface
	longLine                   // "METHOD " and no end of line in sight
)

// classify waits for the client's next bytes, then (within
// HandshakeTimeout) for as many as tell what they are.
func (tn *tunnel) classify() (streamKind, error) {
	first, err := tn.br.Peek(1)
	if err != nil {
		return opaque, err
	}
	c := tn.s.client
	_ = c.SetReadDeadline(time.Now().Add(tn.p.cfg.HandshakeTimeout))
	defer c.SetReadDeadline(time.Time{})
	if first[0] == tlsHandshake {
		return tlsHello, nil
	}
	return requestLine(tn.br), nil
}

// ended is the verdict when reading the client failed with err: done at
// its end, stop otherwise.
func ended(err error) verdict {
	if errors.Is(err, io.EOF) {
		return done
	}
	return stop
}

// tlsHandshake is the content type of a TLS handshake record.
const tlsHandshake = 0x16

// checkClientHello reads the client's first TLS record and refuses a
// ClientHello whose server name is not the tunnel's.
func (tn *tunnel) checkClientHello() verdict {
	c := tn.s.client
	_ = c.SetReadDeadline(time.Now().Add(tn.p.cfg.HandshakeTimeout))
	defer c.SetReadDeadline(time.Time{})
	h, err := tn.br.Peek(5)
	if err != nil {
		return ended(err)
	}
	n := min(5+(int(h[3])<<8|int(h[4])), tn.br.Size())
	rec, err := tn.br.Peek(n)
	if err != nil {
		return ended(err)
	}
	sni := serverName(rec[5:])
	if sni == "" || hostKey(sni) == tn.name {
		return pass
	}
	tn.p.refuse(Refusal{Protocol: "tls", Host: tn.name, Port: tn.port, Reason: "the TLS server name " + printable(sni) + " is not the tunnel's destination " + tn.name})
	// A fatal access_denied alert, so that the client says why.
	tn.silence()
	_, _ = tn.s.client.Write([]byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31})
	return stop
}

// silence stops the destination's bytes without ending the client's
// connection, so that the proxy may write a refusal to it.
func (tn *tunnel) silence() {
	tn.hush.Store(true)
	tn.up.Close()
	<-tn.down
}

// requestLinePattern matches an HTTP/1.x or HTTP/2 request line. A method
// is any token (RFC 9110 §5.6.2): servers take "get" for a method too.
var requestLinePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20} [!-~]+ HTTP/([12])\\.\\d\r?\n$")
})

// methodPrefix matches the start of a request line, a method token and a
// space, or what could still become one.
var methodPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20}( |$)") })

// requestLine tells whether the client's next line, after any empty
// lines (which servers skip), is an HTTP/1.x request line, the HTTP/2
// preface, or something else (opaque). It waits for more bytes only while
// they could still start a request.
func requestLine(br *bufio.Reader) streamKind {
	for {
		b, _ := br.Peek(br.Buffered())
		line := bytes.TrimLeft(b, "\r\n")
		m := methodPrefix().FindSubmatch(line)
		switch {
		case len(line) == 0: // empty lines so far
		case m == nil:
			return opaque
		case len(m[1]) == 1: // "METHOD ": a text line follows; read it whole
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				switch v := requestLinePattern().FindSubmatch(line[:i+1]); {
				case v == nil:
					return opaque
				case v[1][0] == '2':
					return http2
				}
				return http1
			}
		}
		if len(b) >= br.Size() {
			if len(line) == 0 {
				return opaque
			}
			return longLine
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return opaque
		}
	}
}

// checkRequests passes the client's HTTP requests on to the destination,
// each checked to name it, until the client stops (done), a request is
// refused (it answers 403: stop), or a request may switch protocols
// (switched: what follows is to be classified again).
func (tn *tunnel) checkRequests() (v verdict, switched bool) {
	for {
		req, hosts, err := readRequest(tn.br)
		if err != nil {
			return ended(err), false
		}
		if h := foreignHost(req, hosts, tn.name); h != "" {
			f := tn.p.fail("tunnel-http", h, tn.port, refused("a request inside the tunnel to %s names %s", tn.name, printable(h)))
			tn.silence()
			writeFailure(tn.s.client, f)
			return stop, false
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // no Go default
		}
		if err := req.Write(tn.up); err != nil {
			return stop, false
		}
		if req.Method == http.MethodConnect || headerHasToken(req.Header, "Connection", "upgrade") {
			return pass, true
		}
	}
}

// foreignHost returns the host req names (as CONNECT target, absolute
// URI or Host header) that is not name, or "".
func foreignHost(req *http.Request, hosts []string, name string) string {
	var named []string
	switch {
	case req.Method == http.MethodConnect:
		h, _, err := net.SplitHostPort(req.RequestURI)
		if err != nil {
			h = req.RequestURI
		}
		named = append(named, h)
	case req.URL.Host != "":
		named = append(named, req.URL.Hostname())
	}
	for _, h := range hosts {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		named = append(named, h)
	}
	for _, h := range named {
		if hostKey(h) != name {
			return h
		}
	}
	return ""
}

// headerHasToken reports whether a comma-separated header of h holds
// token, ignoring case.
func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// drain writes to w what br holds buffered.
func drain(br *bufio.Reader, w io.Writer) {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		_, _ = w.Write(b)
		_, _ = br.Discard(n)
	}
}

// join copies between a and b both ways (one way on a goroutine of g)
// until both directions end, then closes both.
func join(g *goroutine.Group, bufs *bufPool, a, b net.Conn) {
	done := make(chan struct{})
	g.Go(func() {
		defer close(done)
		copyHalf(b, a, bufs)
	})
	copyHalf(a, b, bufs)
	<-done
	a.Close()
	b.Close()
}

// copyHalf copies src to dst (copyOnce). At src's end it half-closes dst,
// so that the other direction may finish; on an error it closes both.
func copyHalf(dst, src net.Conn, bufs *bufPool) {
	if err := copyOnce(dst, src, bufs); err != nil {
		dst.Close()
		src.Close()
		return
	}
	closeWrite(dst)
}

// copyOnce copies src to dst until src's end: with io.Copy when dst is a
// unix socket, so that Linux splices from the socket src into it, the
// fastest way; through a buffer of bufs otherwise. Splicing into a TCP
// socket on loopback is about half as fast as a 64 KiB user-space copy
// (BenchmarkThroughput's tunnels went from 0.5x to 1.0x of a direct
// download with this rule).
func copyOnce(dst, src net.Conn, bufs *bufPool) error {
	if _, ok := dst.(*net.UnixConn); ok {
		_, err := io.Copy(dst, src)
		return err
	}
	buf := bufs.get()
	defer bufs.put(buf)
	// The wrappers hide ReaderFrom and WriterTo, which would splice.
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
	return err
}

// bufPool holds copy buffers of copyBufSize bytes.
type bufPool struct{ p sync.Pool }

func (b *bufPool) get() *[]byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return buf
	}
	buf := make([]byte, copyBufSize)
	return &buf
}

func (b *bufPool) put(buf *[]byte) { b.p.Put(buf) }

// closeWrite half-closes c (closes it when it cannot).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
