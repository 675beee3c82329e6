package egress

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSNI: inside a CONNECT tunnel, a ClientHello naming another host is
// refused with a TLS alert; the tunnel's own name passes.
func TestSNI(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls origin")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	tp := startProxy(t, Config{AllowNonPublic: true})
	handshake := func(sni string) error {
		c, _, resp, _ := tp.connect(t, "allowed.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		defer tc.Close()
		return tc.Handshake()
	}
	if err := handshake("allowed.test"); err != nil {
		t.Errorf("SNI of the tunnel's name: %v", err)
	}
	err := handshake("other.test")
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("SNI of another name: %v, want a TLS access denied alert", err)
	}
	if r := tp.lastRefusal(t); r.Protocol != "tls" || !strings.Contains(r.Reason, "server name other.test") {
		t.Errorf("policy log: %+v", r)
	}
}

// TestSOCKS5Malformed: broken handshakes get the RFC 1928 answer or a
// closed connection, are logged when they are refusals, and leave the
// proxy serving.
func TestSOCKS5Malformed(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	for _, c := range []struct {
		name string
		send []byte
		want []byte // the answer's first bytes; nil: closed without one
	}{
		{"no methods", []byte{5, 0}, []byte{5, 0xff}},
		{"only username/password", []byte{5, 1, 2}, []byte{5, 0xff}},
		{"truncated greeting", []byte{5, 3, 0}, nil},
		{"bad request version", []byte{5, 1, 0, 4, 1, 0, 3}, []byte{5, 0, 5, socksFailure}},
		{"unknown address type", []byte{5, 1, 0, 5, 1, 0, 9, 1, 2}, []byte{5, 0, 5, socksAddrUnsupp}},
		{"empty name", []byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80}, []byte{5, 0, 5, socksAddrUnsupp}},
		{"BIND", append([]byte{5, 1, 0, 5, 2, 0, 3, 12}, "allowed.test\x00\x50"...), []byte{5, 0, 5, socksCmdUnsupported}},
		{"UDP ASSOCIATE", append([]byte{5, 1, 0, 5, 3, 0, 3, 12}, "allowed.test\x00\x50"...), []byte{5, 0, 5, socksCmdUnsupported}},
		{"port 0", append([]byte{5, 1, 0, 5, 1, 0, 3, 12}, "allowed.test\x00\x00"...), []byte{5, 0, 5, socksNotAllowed}},
		{"garbage name", append([]byte{5, 1, 0, 5, 1, 0, 3, 6}, "a\x00b/..\x00\x50"...), []byte{5, 0, 5, socksNotAllowed}},
		{"255-byte name", append(append([]byte{5, 1, 0, 5, 1, 0, 3, 255}, strings.Repeat("a.", 127)+"b"...), 0, 80), []byte{5, 0, 5, socksNotAllowed}},
		{"SOCKS4", []byte{4, 1, 0, 80, 127, 0, 0, 1, 0}, nil},
	} {
		conn := tp.open(t)
		conn.Write(c.send)
		if cw, ok := conn.(*net.UnixConn); ok {
			cw.CloseWrite()
		}
		got, _ := io.ReadAll(conn)
		if c.want == nil && len(got) != 0 || c.want != nil && !strings.HasPrefix(string(got), string(c.want)) {
			t.Errorf("%s: answer % x, want % x…", c.name, got, c.want)
		}
	}
	rs, _ := tp.Refusals()
	if len(rs) < 8 {
		t.Errorf("%d refusals logged for the malformed requests: %v", len(rs), rs)
	}
	if _, _, rep := tp.socks5(t, "allowed.test", port); rep != socksOK {
		t.Errorf("after the garbage, a good request: %#x", rep)
	}
}

// TestGarbage: whatever a client sends, the proxy answers or closes, and
// keeps serving.
func TestGarbage(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true, HandshakeTimeout: 2 * time.Second})
	port := origin(t)
	for _, g := range []string{
		"\x00\x00\x00\x00",
		"\x16\x03\x01\x00\x05hello",
		"GET\r\n\r\n",
		"GET / HTTP/9.9\r\n\r\n",
		"CONNECT\r\n\r\n",
		"CONNECT allowed.test HTTP/1.1\r\n\r\n",
		"CONNECT allowed.test:99999 HTTP/1.1\r\n\r\n",
		"CONNECT :80 HTTP/1.1\r\n\r\n",
		"GET http://allowed.test:" + port + "/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET http://allowed.test:" + port + "/ HTTP/1.1\r\n" + strings.Repeat("X-Big: "+strings.Repeat("x", 1000)+"\r\n", 40) + "\r\n",
		"GET http://" + strings.Repeat("a", 300) + "/ HTTP/1.1\r\n\r\n",
		"GET http://a..b/ HTTP/1.1\r\n\r\n",
		"GET http://allowed.test:0/ HTTP/1.1\r\n\r\n",
		strings.Repeat("\xff", 70000),
	} {
		c := tp.open(t)
		go func() {
			io.WriteString(c, g)
			if uc, ok := c.(*net.UnixConn); ok {
				uc.CloseWrite()
			}
		}()
		got, _ := io.ReadAll(c)
		if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 4") {
			t.Errorf("%.40q: answer %.80q", g, got)
		}
	}
	if code, _, _ := tp.get(t, "http://allowed.test:"+port+"/"); code != 200 {
		t.Errorf("after the garbage, a good request: %d", code)
	}
}

// FuzzConn feeds arbitrary bytes to a proxy: it must neither crash nor
// hang, and keep serving. Run with -fuzz for more than the seeds.
func FuzzConn(f *testing.F) {
	for _, seed := range []string{"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x00\x50", "CONNECT a:1 HTTP/1.1\r\n\r\n", "GET http://x/ HTTP/1.1\r\n\r\n", "\x16\x03\x01\x00\x01\x01", "\x04"} {
		f.Add([]byte(seed))
	}
	tp := startProxy(f, Config{HandshakeTimeout: time.Second})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.Dial("unix", tp.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(b)
		c.(*net.UnixConn).CloseWrite()
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, net.ErrClosed) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the proxy neither answered nor closed %q", b)
			}
		}
	})
}

// TestLimits: at the connection limit more connections are closed and
// logged; a silent client is dropped after the handshake timeout; a
// tunnel through which nothing moves is closed after the idle timeout.
func TestLimits(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true, MaxConns: 2, HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	port := bannerServer(t)
	t.Run("handshake-timeout", func(t *testing.T) {
		c := tp.open(t)
		start := time.Now()
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("a silent client: %v, want EOF", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("dropped after %v", d)
		}
	})
	t.Run("idle-timeout", func(t *testing.T) {
		c, br, rep := tp.socks5(t, "allowed.test", port)
		if rep != socksOK {
			t.Fatalf("reply %#x", rep)
		}
		br.ReadString('\n') // the banner; then nothing moves
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("an idle tunnel: %v, want EOF", err)
		}
		c.Close()
	})
	t.Run("max-conns", func(t *testing.T) {
		waitIdle(t, tp)
		// Two tunnels kept busy hold both slots.
		var held []net.Conn
		for i := 0; i < 2; i++ {
			c, br, rep := tp.socks5(t, "allowed.test", port)
			if rep != socksOK {
				t.Fatalf("reply %#x", rep)
			}
			br.ReadString('\n')
			held = append(held, c)
		}
		c := tp.open(t)
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("a third connection: %v, want EOF", err)
		}
		if r := tp.lastRefusal(t); !strings.Contains(r.Reason, "too many connections at once (the limit is 2)") {
			t.Errorf("policy log: %+v", r)
		}
		for _, h := range held {
			h.Close()
		}
	})
}

// TestSetAllowList: a new list applies to the next connection.
func TestSetAllowList(t *testing.T) {
	tp := startProxy(t, Config{AllowNonPublic: true})
	port := origin(t)
	if code, _, _ := tp.get(t, "http://other.test:"+port+"/"); code != 403 {
		t.Fatalf("before: %d", code)
	}
	l, err := ParseAllowList("other.test")
	if err != nil {
		t.Fatal(err)
	}
	tp.SetAllowList(l)
	if tp.AllowList().String() != "other.test" {
		t.Errorf("AllowList() = %q", tp.AllowList())
	}
	if code, _, _ := tp.get(t, "http://other.test:"+port+"/"); code != 200 {
		t.Errorf("newly allowed: %d", code)
	}
	if code, _, _ := tp.get(t, "http://allowed.test:"+port+"/"); code != 403 {
		t.Errorf("no longer allowed: %d", code)
	}
}

// TestPolicyLogBounded: the log keeps the last LogSize refusals and
// counts them all; OnRefusal sees each.
func TestPolicyLogBounded(t *testing.T) {
	seen := make(chan Refusal, 10)
	tp := startProxy(t, Config{LogSize: 3, OnRefusal: func(r Refusal) { seen <- r }})
	for _, h := range []string{"n1.test", "n2.test", "n3.test", "n4.test", "n5.test"} {
		tp.get(t, "http://"+h+"/")
	}
	rs, total := tp.Refusals()
	if total != 5 || len(rs) != 3 || rs[0].Host != "n3.test" || rs[2].Host != "n5.test" {
		t.Errorf("log %v, total %d", rs, total)
	}
	if len(seen) != 5 {
		t.Errorf("OnRefusal called %d times", len(seen))
	}
	if s := rs[2].String(); !strings.HasSuffix(s, " http n5.test:80: n5.test is not on the sandbox's domain allow list") {
		t.Errorf("String() = %q", s)
	}
}

// waitIdle waits until tp serves no connection.
func waitIdle(t *testing.T, tp *testProxy) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); tp.active() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still served", tp.active())
		}
	}
}
