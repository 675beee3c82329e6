package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every test talks only to servers it starts on loopback. Names resolve
// through testResolver; the proxy refuses loopback destinations unless a
// test sets AllowNonPublic.

// testResolver is the made-up DNS of the tests.
func testResolver() *StaticResolver {
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	return &StaticResolver{Hosts: map[string][]netip.Addr{
		"allowed.test":    lo,
		"other.test":      lo,
		"a.wild.test":     lo,
		"a.b.wild.test":   lo,
		"wild.test":       lo,
		"metadata.test":   {netip.MustParseAddr("169.254.169.254")},
		"private.test":    {netip.MustParseAddr("10.1.2.3")},
		"v6.test":         {netip.MustParseAddr("::1")},
		"mapped.test":     {netip.MustParseAddr("::ffff:127.0.0.1")},
		"nat64.test":      {netip.MustParseAddr("64:ff9b::7f00:1")},
		"ula.test":        {netip.MustParseAddr("fd00::1")},
		"shared.test":     {netip.MustParseAddr("100.64.0.1")},
		"unresolved.test": nil,
	}}
}

// testAllow is the allow list of most tests.
const testAllow = "allowed.test,*.wild.test,metadata.test,private.test,v6.test,mapped.test,nat64.test,ula.test,shared.test,unresolved.test"

// testProxy is a proxy serving on a unix socket and on a TCP socket on
// loopback (as in production, where the TCP socket is in the sandbox's
// network namespace).
type testProxy struct {
	*Proxy
	sock string
	tcp  string
}

// startProxy starts a proxy configured by cfg (allow list, resolver and
// AllowNonPublic defaulted for the tests) on a unix socket and a TCP
// socket; it is closed when the test ends.
func startProxy(t testing.TB, cfg Config) *testProxy {
	t.Helper()
	if cfg.Allow == nil {
		l, err := ParseAllowList(testAllow)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Allow = l
	}
	if cfg.Resolver == nil {
		cfg.Resolver = testResolver()
	}
	p := New(cfg)
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 2)
	go func() { served <- p.Serve(ln) }()
	go func() { served <- p.Serve(tln) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for i := 0; i < 2; i++ {
			if err := <-served; err != ErrProxyClosed {
				t.Errorf("Serve returned %v, want ErrProxyClosed", err)
			}
		}
	})
	return &testProxy{Proxy: p, sock: sock, tcp: tln.Addr().String()}
}

// open returns a new connection to the proxy's unix socket, closed when
// the test ends.
func (tp *testProxy) open(t testing.TB) net.Conn {
	t.Helper()
	return tp.dial(t, "unix", tp.sock)
}

// dial returns a new connection to the proxy at address, closed when the
// test ends.
func (tp *testProxy) dial(t testing.TB, network, address string) net.Conn {
	t.Helper()
	c, err := net.Dial(network, address)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// lastRefusal returns the newest entry of the policy log, failing the
// test when there is none.
func (tp *testProxy) lastRefusal(t testing.TB) Refusal {
	t.Helper()
	rs, _ := tp.Refusals()
	if len(rs) == 0 {
		t.Fatal("the policy log is empty")
	}
	return rs[len(rs)-1]
}

// origin is an HTTP server on loopback that tells what it got.
func origin(t testing.TB) (port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "origin: %s %s host=%s body=%d", r.Method, r.URL.RequestURI(), r.Host, len(body))
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// bannerServer is a TCP server on loopback that speaks first, then echoes
// one line; a server-first protocol such as SMTP or SSH.
func bannerServer(t testing.TB) (port string) {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "220 banner\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "echo "+line)
	})
}

// serveTCP runs handle, on a goroutine of its own, for each connection to
// a TCP server on loopback, which it closes afterwards; it returns the
// server's port. The server stops when the test ends.
func serveTCP(t testing.TB, handle func(net.Conn)) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

// roundTrip writes raw to c and reads one response.
func roundTrip(t testing.TB, c net.Conn, br *bufio.Reader, raw string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", raw, err)
	}
	return resp
}

// body reads and closes the body of resp.
func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// get sends one absolute-URI request for url through the proxy and
// returns the status and body.
func (tp *testProxy) get(t testing.TB, url string, headers ...string) (int, string, http.Header) {
	t.Helper()
	c := tp.open(t)
	raw := "GET " + url + " HTTP/1.1\r\n" + strings.Join(append(headers, ""), "\r\n") + "\r\n"
	resp := roundTrip(t, c, bufio.NewReader(c), raw)
	return resp.StatusCode, body(t, resp), resp.Header
}

// connect opens a CONNECT tunnel to target and returns the connection,
// its reader and the proxy's response (its body read when not 200).
func (tp *testProxy) connect(t testing.TB, target string, headers ...string) (net.Conn, *bufio.Reader, *http.Response, string) {
	t.Helper()
	c := tp.open(t)
	br := bufio.NewReader(c)
	raw := "CONNECT " + target + " HTTP/1.1\r\n" + strings.Join(append(headers, ""), "\r\n") + "\r\n"
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodConnect, "http://"+target, nil)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	text := ""
	if resp.StatusCode != http.StatusOK {
		text = body(t, resp)
	}
	return c, br, resp, text
}

// socks5 asks the proxy for a SOCKS5 CONNECT to host:port (as a domain
// name, or as an address when host parses as one) and returns the
// connection, its reader and the reply code.
func (tp *testProxy) socks5(t testing.TB, host string, port string) (net.Conn, *bufio.Reader, byte) {
	t.Helper()
	c := tp.open(t)
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var greet [2]byte
	if _, err := io.ReadFull(br, greet[:]); err != nil || greet != [2]byte{5, 0} {
		t.Fatalf("greeting: %v %v", greet, err)
	}
	n, _ := strconv.Atoi(port)
	req := []byte{5, 1, 0}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			req = append(req, 1)
		} else {
			req = append(req, 4)
		}
		req = append(req, a.AsSlice()...)
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	req = append(req, byte(n>>8), byte(n))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(br, rep[:]); err != nil {
		t.Fatalf("SOCKS5 reply: %v", err)
	}
	return c, br, rep[1]
}
