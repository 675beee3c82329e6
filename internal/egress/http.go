package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

var errHeadTooLarge = fmt.Errorf("request or response head larger than %d bytes", headBufSize)

// serveHTTP serves a client speaking HTTP: a CONNECT request opens a
// tunnel; an absolute-URI request starts forwarding.
func (p *Proxy) serveHTTP(s *session, br *bufio.Reader) {
	req, hosts, err := readRequest(br)
	if err != nil {
		writeFailure(s.client, malformed(err))
		return
	}
	if req.Method == http.MethodConnect {
		p.connect(s, br, req, hosts)
		return
	}
	p.forward(s, br, req, hosts)
}

// connect serves a CONNECT request: it opens the tunnel to the target,
// which every Host header must name.
func (p *Proxy) connect(s *session, br *bufio.Reader, req *http.Request, hosts []string) {
	host, port, err := splitHostPort(req.RequestURI)
	if err != nil {
		writeFailure(s.client, malformed(fmt.Errorf("CONNECT target %q: give host:port: %v", printable(req.RequestURI), err)))
		return
	}
	for _, h := range hosts {
		if !sameHost(h, host) {
			writeFailure(s.client, p.fail("connect", host, port, refused("the Host header %s does not name the CONNECT target %s", printable(h), printable(host))))
			return
		}
	}
	established := func() error {
		_, err := io.WriteString(s.client, "HTTP/1.1 200 Connection established\r\n\r\n")
		return err
	}
	if p.intercept(s, br, host, port, established) {
		return
	}
	up, name, f := p.open(p.ctx, "connect", host, port)
	if f != nil {
		writeFailure(s.client, f)
		return
	}
	if err := established(); err != nil {
		up.Close()
		return
	}
	p.tunnel(s, br, up, name, port)
}

// readRequest reads a request from br (its head at most headBufSize
// bytes), with the values of its Host headers, which http.ReadRequest
// drops when the request line has an absolute URI.
func readRequest(br *bufio.Reader) (*http.Request, []string, error) {
	if err := skipEmptyLines(br); err != nil {
		return nil, nil, err
	}
	head, err := peekHead(br)
	if err != nil {
		return nil, nil, err
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, nil, err
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	return req, h.Values("Host"), nil
}

// skipEmptyLines discards the CRs and LFs before a request line, which
// servers skip (RFC 9112 §2.2), up to a buffer's worth.
func skipEmptyLines(br *bufio.Reader) error {
	for n := 0; ; n++ {
		b, err := br.Peek(1)
		if err != nil {
			return err
		}
		if b[0] != '\r' && b[0] != '\n' {
			return nil
		}
		if n == br.Size() {
			return errors.New("too many empty lines")
		}
		_, _ = br.Discard(1)
	}
}

// peekHead waits until br holds a whole head (up to the empty line) and
// returns it, still buffered.
func peekHead(br *bufio.Reader) ([]byte, error) {
	from := 0
	for {
		b, _ := br.Peek(br.Buffered())
		if i := headEnd(b, from); i > 0 {
			return b[:i], nil
		}
		from = max(len(b)-3, 0)
		if len(b) >= br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return nil, err
		}
	}
}

// headEnd returns the length of the head at the start of b (through its
// empty line), searching from index from, or 0.
func headEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return 0
}

// sameHost reports whether the Host header value h names host (as a
// client gave it, without port), ignoring case, a trailing dot and a
// port in h.
func sameHost(h, host string) bool {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return hostKey(h) == hostKey(host)
}

// hostKey returns the form in which two hosts are compared: the
// canonical name, or, for what is not a name, the lower-cased text
// without brackets.
func hostKey(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if n, err := canonicalName(h); err == nil {
		return n
	}
	return strings.ToLower(h)
}

// malformed is the failure of a request the proxy cannot read.
func malformed(err error) *failure {
	return &failure{status: http.StatusBadRequest, socks: socksFailure, reason: "malformed request: " + err.Error()}
}

// writeFailure answers f to an HTTP client: its status, a Proxy-Status
// header (RFC 9209) and the reason as the body. The connection is to be
// closed afterwards.
func writeFailure(w io.Writer, f *failure) {
	kind := "destination_unavailable"
	switch {
	case f.status == http.StatusBadRequest:
		kind = "http_request_error"
	case f.policy:
		kind = "http_request_denied"
	case f.status == http.StatusGatewayTimeout:
		kind = "connection_timeout"
	case strings.HasPrefix(f.reason, "cannot resolve"):
		kind = "dns_error"
	}
	body := f.reason + "\n"
	if c, ok := w.(net.Conn); ok {
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	}
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nProxy-Status: agentbox; error=%s; details=%s\r\nConnection: close\r\n\r\n%s",
		f.status, http.StatusText(f.status), len(body), kind, sfString(f.reason), body)
}

// sfString quotes s as a structured-field string (RFC 8941): printable
// ASCII, with '"' and '\' escaped.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// isClosed reports whether err only says that a connection ended.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}
