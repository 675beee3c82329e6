package secretproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("SECRETPROXY_TEST_MAKE_CA"); dir != "" {
		// A child of TestCARacingProcessesGetOneCA.
		ca, err := LoadOrCreateCA(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(ca.CertPEM())
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// Every test talks to servers it starts on loopback: an upstream HTTPS
// server with a CA of its own (which the proxy trusts through RootCAs),
// playing every host name, and the proxy, served one listener per host
// name as the egress proxy or a firewall redirect would hand it
// connections.

// received is a request the upstream server received.
type received struct {
	Host   string
	URI    string
	Header http.Header
	Body   string
}

// upstream is the test's HTTPS server for every name.
type upstream struct {
	srv   *httptest.Server
	plain *httptest.Server // the same, cleartext (port 80)
	ca    *CA
	pool  *x509.CertPool
	conns atomic.Int64
	mu    sync.Mutex
	got   []received
	// handler answers; nil: 200 "ok".
	handler http.HandlerFunc
}

func newTestCA(t testing.TB) *CA {
	t.Helper()
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func startUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{ca: newTestCA(t), handler: h}
	u.pool = x509.NewCertPool()
	u.pool.AppendCertsFromPEM(u.ca.CertPEM())
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return u.ca.Certificate(hello.ServerName)
	}}
	u.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.plain = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.plain.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.got = append(u.got, received{Host: r.Host, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
	u.mu.Unlock()
	if u.handler != nil {
		u.handler(w, r)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (u *upstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = nil
}

func (u *upstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

// contains reports whether any received request holds s anywhere.
func (u *upstream) contains(s string) bool {
	for _, r := range u.requests() {
		if strings.Contains(r.URI, s) || strings.Contains(r.Body, s) || strings.Contains(r.Host, s) {
			return true
		}
		for _, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					return true
				}
			}
		}
	}
	return false
}

// dial connects to the upstream server whatever the host: the
// cleartext one for port 80.
func (u *upstream) dial(ctx context.Context, _ string, port uint16) (net.Conn, error) {
	var d net.Dialer
	if port == 80 {
		return d.DialContext(ctx, "tcp", u.plain.Listener.Addr().String())
	}
	return d.DialContext(ctx, "tcp", u.srv.Listener.Addr().String())
}

// env is a proxy in front of an upstream, and the events it reported.
type env struct {
	t      testing.TB
	p      *Proxy
	up     *upstream
	ca     *CA
	mu     sync.Mutex
	events []Event
	lnMu   sync.Mutex
	lns    map[string]string // host → address of the proxy's listener for it
	wg     sync.WaitGroup
}

// secret returns a secret with a new placeholder.
func secret(name, value string, hosts ...string) Secret {
	return Secret{Name: name, Placeholder: NewPlaceholder(), Value: value, Hosts: hosts}
}

func startEnv(t testing.TB, h http.HandlerFunc, secrets ...Secret) *env {
	t.Helper()
	return startEnvWith(t, h, nil, secrets...)
}

// startEnvWith is startEnv with the proxy's RootCAs (nil: the
// upstream's CA).
func startEnvWith(t testing.TB, h http.HandlerFunc, roots *x509.CertPool, secrets ...Secret) *env {
	t.Helper()
	e := &env{t: t, up: startUpstream(t, h), ca: newTestCA(t), lns: map[string]string{}}
	if roots == nil {
		roots = e.up.pool
	}
	p, err := New(Config{CA: e.ca, Secrets: secrets, RootCAs: roots, Dial: e.up.dial, OnEvent: e.onEvent})
	if err != nil {
		t.Fatal(err)
	}
	e.p = p
	t.Cleanup(func() {
		p.Close()
		e.wg.Wait()
	})
	return e
}

func (e *env) onEvent(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *env) eventList() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.events...)
}

// hasEvent reports whether an event names secret (any, when "") and
// holds reason in its Reason.
func (e *env) hasEvent(secret, reason string) bool {
	for _, ev := range e.eventList() {
		if (secret == "" || ev.Secret == secret) && strings.Contains(ev.Reason, reason) {
			return true
		}
	}
	return false
}

// wantEvent fails the test unless an event names secret (any, when "")
// and holds reason.
func (e *env) wantEvent(secret, reason string) {
	e.t.Helper()
	if !e.hasEvent(secret, reason) {
		e.t.Fatalf("no event for %q saying %q: %+v", secret, reason, e.eventList())
	}
}

// listen returns the address of a listener whose connections the proxy
// serves as going to host:443 (TLS), or host:80 with serve = ServeHTTP.
func (e *env) listen(host string, tlsConn bool) string {
	key := host + map[bool]string{true: ":tls", false: ":http"}[tlsConn]
	e.lnMu.Lock()
	defer e.lnMu.Unlock()
	if a, ok := e.lns[key]; ok {
		return a
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ln.Close() })
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				if tlsConn {
					e.p.ServeTLS(context.Background(), c, host, 443)
				} else {
					e.p.ServeHTTP(context.Background(), c, host, 80)
				}
			}()
		}
	}()
	e.lns[key] = ln.Addr().String()
	return ln.Addr().String()
}

// raw sends raw bytes on a new connection that the proxy serves as
// going to host (over TLS with SNI sni when tlsConn), then reads all it
// answers until it closes or 5 seconds pass.
func (e *env) raw(host, sni string, tlsConn bool, request string) (string, error) {
	e.t.Helper()
	c, err := e.dial(host, sni, tlsConn)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		err = nil // kept alive: what came is the answer
	}
	return string(b), err
}

// client returns an HTTP client (the sandbox) whose connections to a
// host go to the proxy's listener for it; it trusts the proxy's CA.
func (e *env) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.ca.CertPEM())
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, _ := net.SplitHostPort(addr)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.listen(host, port == "443"))
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends req with the client and returns the status and body.
func (e *env) do(c *http.Client, req *http.Request) (int, string) {
	e.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// pool returns a pool holding ca's certificate.
func (ca *CA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(ca.CertPEM())
	return p
}

// dial opens a connection that the proxy serves as going to host, over
// TLS with SNI sni when tlsConn (handshake done).
func (e *env) dial(host, sni string, tlsConn bool) (net.Conn, error) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.listen(host, tlsConn))
	if err != nil {
		e.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if !tlsConn {
		return c, nil
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: e.ca.pool(), InsecureSkipVerify: sni != host})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}
