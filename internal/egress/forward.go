package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// forwarder serves the absolute-URI requests of one client connection:
// each goes to the host its URI names, over an upstream connection kept
// while the requests go to the same host and port.
type forwarder struct {
	p   *Proxy
	s   *session
	br  *bufio.Reader // the client's
	cw  *bufio.Writer // the client's
	up  net.Conn
	upr *bufio.Reader
	key string // name:port of up
}

// forward serves req, the first request of the client of s, and the
// requests that follow it on the connection.
func (p *Proxy) forward(s *session, br *bufio.Reader, req *http.Request, hosts []string) {
	fw := &forwarder{p: p, s: s, br: br, cw: bufio.NewWriter(s.client)}
	for {
		_ = s.client.SetDeadline(time.Time{})
		if !fw.serve(req, hosts) {
			return
		}
		// The next request may come a while later; the connection is idle
		// until it does.
		_ = s.client.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		var err error
		if req, hosts, err = readRequest(br); err != nil {
			if !isClosed(err) && !errors.Is(err, errTimeout) {
				writeFailure(s.client, malformed(err))
			}
			return
		}
	}
}

// errTimeout matches the error of a read past its deadline.
var errTimeout = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string { return "timeout" }

// Is makes every net.Error that is a timeout match errTimeout.
func (timeoutError) Is(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serve forwards one request and its response, and reports whether the
// client connection may carry another.
func (fw *forwarder) serve(req *http.Request, hosts []string) bool {
	p, s := fw.p, fw.s
	switch {
	case req.URL.Scheme == "https":
		writeFailure(s.client, malformed(errors.New("an https:// URL goes through a CONNECT tunnel (set HTTPS_PROXY)")))
		return false
	case req.URL.Scheme != "http" || req.URL.Host == "":
		writeFailure(s.client, malformed(errors.New("this is a proxy: send absolute-URI requests (GET http://name/path HTTP/1.1) or CONNECT")))
		return false
	}
	host := req.URL.Hostname()
	port := uint16(80)
	if ps := req.URL.Port(); ps != "" {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil || n == 0 {
			writeFailure(s.client, malformed(fmt.Errorf("bad port %q", ps)))
			return false
		}
		port = uint16(n)
	}
	for _, h := range hosts {
		if !sameHost(h, host) {
			writeFailure(s.client, p.fail("http", host, port, refused("the Host header %s does not name the host of the URL, %s", printable(h), printable(host))))
			return false
		}
	}
	if f := fw.connectTo(host, port); f != nil {
		writeFailure(s.client, f)
		return false
	}
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // no Go default
	}
	if err := p.rewrite(req, host); err != nil {
		writeFailure(s.client, malformed(err))
		return false
	}
	return fw.exchange(req)
}

// connectTo makes the upstream connection go to host:port, reusing the
// current one when it already does.
func (fw *forwarder) connectTo(host string, port uint16) *failure {
	key := hostKey(host) + ":" + strconv.Itoa(int(port))
	if fw.up != nil && fw.key == key {
		return nil
	}
	fw.closeUp()
	up, _, f := fw.p.open(fw.p.ctx, "http", host, port)
	if f != nil {
		return f
	}
	if !fw.s.setUpstream(up) {
		return &failure{status: http.StatusServiceUnavailable, socks: socksFailure, reason: "the proxy is closing"}
	}
	fw.up, fw.upr, fw.key = up, bufio.NewReaderSize(up, headBufSize), key
	return nil
}

func (fw *forwarder) closeUp() {
	if fw.up != nil {
		fw.up.Close()
		fw.up, fw.upr, fw.key = nil, nil, ""
	}
}

// exchange sends req upstream (its body streamed from the client while
// the response is read, so that "Expect: 100-continue" works) and relays
// the responses, and reports whether the client connection may carry
// another request.
func (fw *forwarder) exchange(req *http.Request) bool {
	up := fw.up
	wrote := make(chan error, 1)
	fw.p.g.Go(func() { wrote <- req.Write(up) })
	for {
		if _, err := peekHead(fw.upr); err != nil {
			fw.upstreamFailed(err)
			return false
		}
		resp, err := http.ReadResponse(fw.upr, req)
		if err != nil {
			fw.upstreamFailed(err)
			return false
		}
		werr := fw.writeResponse(resp)
		resp.Body.Close()
		switch {
		case werr != nil:
			return false
		case resp.StatusCode == http.StatusSwitchingProtocols:
			if <-wrote != nil {
				return false
			}
			drain(fw.br, up)
			drain(fw.upr, fw.s.client)
			join(&fw.p.g, &fw.p.bufs, fw.s.client, up)
			return false
		case resp.StatusCode < 200:
			continue // 100 Continue, 103 Early Hints: the final response follows
		}
		if err := <-wrote; err != nil || req.Close || resp.Close {
			return false
		}
		return true
	}
}

// writeResponse relays resp to the client. A body of known length is
// copied as it is, in large reads and writes; others (chunked, read to
// the end, none) go through resp.Write.
func (fw *forwarder) writeResponse(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.ContentLength <= 0 || resp.TransferEncoding != nil {
		err := resp.Write(fw.cw)
		if ferr := fw.cw.Flush(); err == nil {
			err = ferr
		}
		return err
	}
	if resp.Close {
		resp.Header.Set("Connection", "close")
	}
	fmt.Fprintf(fw.cw, "HTTP/1.1 %s\r\n", resp.Status)
	_ = resp.Header.Write(fw.cw)
	_, _ = fw.cw.WriteString("\r\n")
	if err := fw.cw.Flush(); err != nil {
		return err
	}
	buf := fw.p.bufs.get()
	defer fw.p.bufs.put(buf)
	_, err := io.CopyBuffer(fw.s.client, resp.Body, *buf)
	return err
}

// upstreamFailed answers 502 when the upstream sent no usable response.
func (fw *forwarder) upstreamFailed(err error) {
	fw.closeUp()
	writeFailure(fw.s.client, &failure{status: http.StatusBadGateway, socks: socksFailure, reason: "no valid response from the destination: " + err.Error()})
}
