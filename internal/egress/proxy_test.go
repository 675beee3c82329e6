package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestAllowedName: an allowed name is reached by each protocol, and the
// origin sees the name as the client wrote it.
func TestAllowedName(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	t.Run("http", func(t *testing.T) {
		code, text, _ := tp.get(t, "http://allowed.test:"+port+"/a?b=1", "Host: allowed.test:"+port)
		if code != 200 || text != "origin: GET /a?b=1 host=allowed.test:"+port+" body=0" {
			t.Errorf("%d %q", code, text)
		}
	})
	t.Run("connect", func(t *testing.T) {
		c, br, resp, text := tp.connect(t, "allowed.test:"+port, "Host: allowed.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d %s", resp.StatusCode, text)
		}
		r := roundTrip(t, c, br, "GET /x HTTP/1.1\r\nHost: allowed.test:"+port+"\r\n\r\n")
		if got := body(t, r); got != "origin: GET /x host=allowed.test:"+port+" body=0" {
			t.Errorf("through the tunnel: %q", got)
		}
	})
	t.Run("tcp-listener", func(t *testing.T) {
		c := tp.dial(t, "tcp", tp.tcp)
		r := roundTrip(t, c, bufio.NewReader(c), "GET http://allowed.test:"+port+"/t HTTP/1.1\r\n\r\n")
		if got := body(t, r); got != "origin: GET /t host=allowed.test:"+port+" body=0" {
			t.Errorf("through the TCP listener: %q", got)
		}
	})
	t.Run("socks5h", func(t *testing.T) {
		c, br, rep := tp.socks5(t, "a.b.wild.test", port)
		if rep != socksOK {
			t.Fatalf("SOCKS5 reply %#x", rep)
		}
		r := roundTrip(t, c, br, "GET /y HTTP/1.1\r\nHost: a.b.wild.test\r\n\r\n")
		if got := body(t, r); got != "origin: GET /y host=a.b.wild.test body=0" {
			t.Errorf("through SOCKS5: %q", got)
		}
	})
	if _, n := tp.Refusals(); n != 0 {
		t.Errorf("allowed requests were logged as refusals: %v", n)
	}
}

// TestUnlistedName: a name not on the list is refused by each protocol,
// with the reason, and logged.
func TestUnlistedName(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	const reason = "other.test is not on the sandbox's domain allow list"
	check := func(t *testing.T, proto string) {
		t.Helper()
		r := tp.lastRefusal(t)
		if r.Protocol != proto || r.Host != "other.test" || r.Reason != reason || r.Time.IsZero() {
			t.Errorf("policy log: %+v", r)
		}
	}
	t.Run("http", func(t *testing.T) {
		code, text, h := tp.get(t, "http://other.test:"+port+"/")
		if code != 403 || text != reason+"\n" || !strings.Contains(h.Get("Proxy-Status"), "error=http_request_denied") {
			t.Errorf("%d %q %q", code, text, h.Get("Proxy-Status"))
		}
		check(t, "http")
	})
	t.Run("connect", func(t *testing.T) {
		_, _, resp, text := tp.connect(t, "other.test:443")
		if resp.StatusCode != 403 || text != reason+"\n" {
			t.Errorf("%d %q", resp.StatusCode, text)
		}
		check(t, "connect")
	})
	t.Run("socks5", func(t *testing.T) {
		if _, _, rep := tp.socks5(t, "other.test", port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 reply %#x, want 0x02", rep)
		}
		check(t, "socks5")
	})
	t.Run("wildcard-apex", func(t *testing.T) {
		if code, _, _ := tp.get(t, "http://wild.test:"+port+"/"); code != 403 {
			t.Errorf("wild.test under *.wild.test: %d, want 403", code)
		}
	})
}

// TestIPLiterals: addresses are refused in every form a client or
// resolver accepts, before anything is dialled.
func TestIPLiterals(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	for _, host := range []string{"127.0.0.1", "[::1]", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "127.0.0.1."} {
		code, text, _ := tp.get(t, "http://"+host+":"+port+"/")
		if code != 403 || !strings.Contains(text, "an IP address, not a name") {
			t.Errorf("http %s: %d %q", host, code, text)
		}
		_, _, resp, text := tp.connect(t, host+":"+port)
		if resp.StatusCode != 403 || !strings.Contains(text, "an IP address") {
			t.Errorf("CONNECT %s: %d %q", host, resp.StatusCode, text)
		}
	}
	for _, host := range []string{"127.0.0.1", "::1", "[::1]", "2130706433"} {
		if _, _, rep := tp.socks5(t, host, port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 %s: reply %#x, want 0x02", host, rep)
		}
		if r := tp.lastRefusal(t); !strings.Contains(r.Reason, "an IP address") {
			t.Errorf("SOCKS5 %s logged as %+v", host, r)
		}
	}
}

// TestNonPublicDestinations: an allowed name resolving to an internal
// address (DNS rebinding, cloud metadata) is refused unless the proxy
// allows non-public destinations.
func TestNonPublicDestinations(t *testing.T) {
	strict := startProxy(t, Config{})
	port := origin(t)
	for host, what := range map[string]string{
		"metadata.test": "169.254.169.254 is a link-local address",
		"private.test":  "10.1.2.3 is a private address",
		"v6.test":       "::1 is a loopback address",
		"mapped.test":   "::ffff:127.0.0.1 is a loopback address",
		"nat64.test":    "64:ff9b::7f00:1 is a loopback address",
		"ula.test":      "fd00::1 is a unique local",
		"shared.test":   "100.64.0.1 is a shared",
		"a.wild.test":   "127.0.0.1 is a loopback address",
	} {
		code, text, _ := strict.get(t, "http://"+host+":"+port+"/")
		if code != 403 || !strings.Contains(text, what) {
			t.Errorf("%s: %d %q, want 403 saying %q", host, code, text, what)
		}
		if _, _, rep := strict.socks5(t, host, port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 %s: reply %#x", host, rep)
		}
	}
	open := startProxy(t, Config{AllowNonPublic: true})
	if code, _, _ := open.get(t, "http://a.wild.test:"+port+"/"); code != 200 {
		t.Errorf("AllowNonPublic: a name on loopback: %d, want 200", code)
	}
}

// TestSpoofedHost: a Host header naming another host than the target is
// refused, outside and inside tunnels, on every request of a connection.
func TestSpoofedHost(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	t.Run("absolute-uri", func(t *testing.T) {
		code, text, _ := tp.get(t, "http://allowed.test:"+port+"/", "Host: other.test")
		if code != 403 || !strings.Contains(text, "the Host header other.test does not name the host of the URL") {
			t.Errorf("%d %q", code, text)
		}
	})
	t.Run("connect-header", func(t *testing.T) {
		_, _, resp, text := tp.connect(t, "allowed.test:"+port, "Host: other.test:"+port)
		if resp.StatusCode != 403 || !strings.Contains(text, "does not name the CONNECT target") {
			t.Errorf("%d %q", resp.StatusCode, text)
		}
	})
	t.Run("inside-tunnel", func(t *testing.T) {
		c, br, resp, _ := tp.connect(t, "allowed.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		// The first request is fine; the second, on the same connection,
		// is not.
		if got := body(t, roundTrip(t, c, br, "GET /1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")); !strings.HasPrefix(got, "origin: GET /1") {
			t.Fatalf("first request: %q", got)
		}
		r := roundTrip(t, c, br, "GET /2 HTTP/1.1\r\nHost: other.test\r\n\r\n")
		if text := body(t, r); r.StatusCode != 403 || !strings.Contains(text, "inside the tunnel to allowed.test names other.test") || r.Header.Get("Proxy-Status") == "" {
			t.Errorf("spoofed second request: %d %q", r.StatusCode, text)
		}
		if rf := tp.lastRefusal(t); rf.Protocol != "tunnel-http" || rf.Host != "other.test" {
			t.Errorf("policy log: %+v", rf)
		}
	})
}

// TestRelayedConnect: a CONNECT (or an absolute-URI request) sent inside
// a tunnel to an allowed name, asking for an unlisted one, is refused:
// the proxy reads it as a request of the tunnel. (With TLS inside, such a
// request would be encrypted and reach only the allowed host, which
// would have to be a proxy itself to pass it on.)
func TestRelayedConnect(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	for _, inner := range []string{
		"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
		"CONNECT other.test:443 HTTP/1.1\r\n\r\n",
		"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
	} {
		c, br, resp, _ := tp.connect(t, "allowed.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		r := roundTrip(t, c, br, inner)
		if text := body(t, r); r.StatusCode != 403 || !strings.Contains(text, "names other.test") {
			t.Errorf("%q inside the tunnel: %d %q", inner, r.StatusCode, text)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("%q: the tunnel stays open after the refusal", inner)
		}
	}
}

// TestTunnelBypasses: ways to slip a request for another host past the
// tunnel's checks: empty lines before it (servers skip them), a first
// request that only claims to switch protocols, a CONNECT to the tunnel's
// own name that the destination refuses, and a request line too long to
// read whole.
func TestTunnelBypasses(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	spoof := "GET /s HTTP/1.1\r\nHost: other.test\r\n\r\n"
	for name, c := range map[string]struct{ first, then string }{
		"empty-lines":    {"", "\r\n\r\n\n" + spoof},
		"lower-case":     {"", strings.Replace(spoof, "GET", "get", 1)},
		"fake-upgrade":   {"GET /1 HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\n\r\n", spoof},
		"refused-inner":  {"CONNECT allowed.test:" + port + " HTTP/1.1\r\nHost: allowed.test\r\n\r\n", spoof},
		"upgrade-then-h": {"GET /1 HTTP/1.1\r\nHost: allowed.test\r\nConnection: keep-alive, Upgrade\r\nUpgrade: x\r\n\r\n", "\r\n" + spoof},
	} {
		t.Run(name, func(t *testing.T) {
			c2, br, resp, _ := tp.connect(t, "allowed.test:"+port)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			if c.first != "" {
				r := roundTrip(t, c2, br, c.first)
				body(t, r)
				if r.StatusCode == 403 {
					t.Fatalf("the first request was refused")
				}
			}
			r := roundTrip(t, c2, br, c.then)
			if text := body(t, r); r.StatusCode != 403 || !strings.Contains(text, "names other.test") {
				t.Errorf("%d %q", r.StatusCode, text)
			}
		})
	}
	t.Run("long-line", func(t *testing.T) {
		c, br, resp, _ := tp.connect(t, "allowed.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		go io.WriteString(c, "GET /"+strings.Repeat("a", headBufSize)+" HTTP/1.1\r\nHost: other.test\r\n\r\n")
		if _, err := br.ReadByte(); err == nil {
			t.Error("the tunnel stays open")
		}
		if r := tp.lastRefusal(t); !strings.Contains(r.Reason, "request line longer than") {
			t.Errorf("policy log: %+v", r)
		}
	})
}

// TestServerFirstAndOpaque: bytes that are neither TLS nor HTTP pass both
// ways, and the destination may speak first.
func TestServerFirstAndOpaque(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := bannerServer(t)
	for _, line := range []string{"SSH-2.0-probe\r\n", "EHLO x\r\n", "\x00\x01binary\n"} {
		c, br, rep := tp.socks5(t, "allowed.test", port)
		if rep != socksOK {
			t.Fatalf("reply %#x", rep)
		}
		if banner, _ := br.ReadString('\n'); banner != "220 banner\r\n" {
			t.Errorf("banner %q", banner)
		}
		io.WriteString(c, line)
		if echo, _ := br.ReadString('\n'); echo != "echo "+line {
			t.Errorf("echo of %q: %q", line, echo)
		}
	}
}

// TestCleartextHTTP2Refused: HTTP/2 with prior knowledge inside a tunnel
// cannot be checked, so it is refused.
func TestCleartextHTTP2Refused(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	c, br, resp, _ := tp.connect(t, "allowed.test:"+origin(t))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Error("the tunnel stays open")
	}
	if r := tp.lastRefusal(t); !strings.Contains(r.Reason, "cleartext HTTP/2") {
		t.Errorf("policy log: %+v", r)
	}
}

// TestForwarding: requests with bodies, keep-alive across hosts, and the
// answers to what the proxy cannot do.
func TestForwarding(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	c := tp.open(t)
	br := bufio.NewReader(c)
	for _, c2 := range []struct{ raw, want string }{
		{"POST http://allowed.test:" + port + "/p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", "origin: POST /p host=allowed.test:" + port + " body=5"},
		{"POST http://a.wild.test:" + port + "/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "origin: POST /c host=a.wild.test:" + port + " body=3"},
		{"PUT http://allowed.test:" + port + "/e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "origin: PUT /e host=allowed.test:" + port + " body=2"},
	} {
		r := roundTrip(t, c, br, c2.raw)
		for r.StatusCode == http.StatusContinue {
			var err error
			if r, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := body(t, r); r.StatusCode != 200 || got != c2.want {
			t.Errorf("%q: %d %q", c2.raw, r.StatusCode, got)
		}
	}
	for raw, want := range map[string]string{
		"GET https://allowed.test/ HTTP/1.1\r\n\r\n":   "CONNECT tunnel",
		"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n":    "absolute-URI",
		"GET http://unresolved.test/ HTTP/1.1\r\n\r\n": "cannot resolve unresolved.test: no such host",
	} {
		c := tp.open(t)
		r := roundTrip(t, c, bufio.NewReader(c), raw)
		if text := body(t, r); r.StatusCode/100 != 4 && r.StatusCode != 502 || !strings.Contains(text, want) {
			t.Errorf("%q: %d %q, want %q", raw, r.StatusCode, text, want)
		}
	}
	if _, n := tp.Refusals(); n != 0 {
		t.Errorf("%d failures that are not policy were logged as refusals", n)
	}
}

// TestUpgrade: after a 101 answer the connection carries another
// protocol (a WebSocket over ws://), through forwarding and in a tunnel.
func TestUpgrade(t *testing.T) {
	port := serveTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		line, _ := br.ReadString('\n')
		io.WriteString(c, "echo "+line)
	})
	tp := startProxy(t, Config{AllowNonPublic: true})
	const upgrade = "HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
	fwd := tp.open(t)
	tun, tbr, resp, _ := tp.connect(t, "allowed.test:"+port)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	for name, c := range map[string]struct {
		conn net.Conn
		br   *bufio.Reader
		req  string
	}{
		"forward": {fwd, bufio.NewReader(fwd), "GET http://allowed.test:" + port + "/ws " + upgrade},
		"tunnel":  {tun, tbr, "GET /ws " + upgrade},
	} {
		if r := roundTrip(t, c.conn, c.br, c.req); r.StatusCode != 101 {
			t.Fatalf("%s: status %d", name, r.StatusCode)
		}
		io.WriteString(c.conn, "\x81raw bytes\n")
		if got, _ := c.br.ReadString('\n'); got != "echo \x81raw bytes\n" {
			t.Errorf("%s: after the upgrade: %q", name, got)
		}
	}
}
