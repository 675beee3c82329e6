package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/secretproxy"
)

// The egress proxy with the substituting proxy of internal/secretproxy as
// its interceptor: a client's CONNECTs to a secret's host are served by
// it, others tunnelled as ever.

const interceptValue = "sk-intercepted-value"

type interceptEnv struct {
	egress  *egress.Proxy
	addr    string // the egress proxy's
	sp      *secretproxy.Proxy
	secret  secretproxy.Secret
	upPort  int
	upPool  *x509.CertPool
	proxyCA *secretproxy.CA
	mu      sync.Mutex
	auth    []string // the Authorization headers the upstream got
}

func startIntercept(t *testing.T) *interceptEnv {
	t.Helper()
	e := &interceptEnv{}
	upCA, err := secretproxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.upPool = x509.NewCertPool()
	e.upPool.AppendCertsFromPEM(upCA.CertPEM())
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.auth = append(e.auth, r.Header.Get("Authorization"))
		e.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	up.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Certificate(h.ServerName) }}
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	up.StartTLS()
	t.Cleanup(up.Close)
	e.upPort = up.Listener.Addr().(*net.TCPAddr).Port

	allow, err := egress.ParseAllowList("api.test,other.test")
	if err != nil {
		t.Fatal(err)
	}
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	e.egress = egress.New(egress.Config{Allow: allow, AllowNonPublic: true, Resolver: &egress.StaticResolver{Hosts: map[string][]netip.Addr{"api.test": lo, "other.test": lo}}})
	if e.proxyCA, err = secretproxy.LoadOrCreateCA(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	e.secret = secretproxy.Secret{Name: "API_KEY", Placeholder: secretproxy.NewPlaceholder(), Value: interceptValue, Hosts: []string{"api.test"}}
	e.sp, err = secretproxy.New(secretproxy.Config{CA: e.proxyCA, Secrets: []secretproxy.Secret{e.secret}, RootCAs: e.upPool, Dial: e.egress.Dial})
	if err != nil {
		t.Fatal(err)
	}
	e.egress.SetIntercept(e.sp)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	served := make(chan struct{})
	go func() { defer close(served); _ = e.egress.Serve(ln) }()
	t.Cleanup(func() {
		e.egress.Close()
		e.sp.Close()
		<-served
	})
	return e
}

// get sends GET https://host:upPort/ with the placeholder through the
// egress proxy (HTTPS_PROXY), trusting both CAs.
func (e *interceptEnv) get(t *testing.T, host string) {
	t.Helper()
	roots := e.upPool.Clone()
	roots.AppendCertsFromPEM(e.proxyCA.CertPEM())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+host+":"+strconv.Itoa(e.upPort)+"/", nil)
	req.Header.Set("Authorization", e.secret.Placeholder)
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func (e *interceptEnv) lastAuth(t *testing.T) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.auth) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(e.auth))
	}
	return e.auth[0]
}

func TestInterceptConnectToSecretHostGetsValue(t *testing.T) {
	e := startIntercept(t)
	e.get(t, "api.test")
	if got := e.lastAuth(t); got != interceptValue {
		t.Fatalf("Authorization %q, want the value", got)
	}
}

func TestInterceptOtherHostStillTunnelled(t *testing.T) {
	e := startIntercept(t)
	e.get(t, "other.test")
	if got := e.lastAuth(t); got != e.secret.Placeholder {
		t.Fatalf("Authorization %q, want the placeholder", got)
	}
	// Spliced: a client that trusts only the upstream's CA gets through,
	// which it would not if the substituting proxy answered.
	roots := e.upPool
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}), TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://other.test:" + strconv.Itoa(e.upPort) + "/")
	if err != nil {
		t.Fatalf("a client trusting only the upstream's CA failed through the tunnel: %v", err)
	}
	resp.Body.Close()
}

func TestInterceptSOCKS5ToSecretHostGetsValue(t *testing.T) {
	e := startIntercept(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.proxyCA.CertPEM())
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "socks5h", Host: e.addr}), TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://api.test:"+strconv.Itoa(e.upPort)+"/", nil)
	req.Header.Set("Authorization", e.secret.Placeholder)
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := e.lastAuth(t); got != interceptValue {
		t.Fatalf("Authorization %q, want the value", got)
	}
}

func TestInterceptConnectToIPRefused(t *testing.T) {
	e := startIntercept(t)
	_, resp := e.connect(t, "127.0.0.1:"+strconv.Itoa(e.upPort))
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || e.sp.Intercepts("127.0.0.1") {
		t.Fatalf("CONNECT to an IP: status %d, want 403 and no interception", resp.StatusCode)
	}
}

func TestInterceptDialRefusesNamesOffTheList(t *testing.T) {
	e := startIntercept(t)
	if c, err := e.egress.Dial(context.Background(), "evil.test", 443); err == nil {
		c.Close()
		t.Fatal("Dial reached a name not on the allow list")
	}
}

// plainGet sends an absolute-URI GET for api.test with the placeholder
// through the egress proxy to a cleartext origin and returns the
// Authorization it received.
func (e *interceptEnv) plainGet(t *testing.T) string {
	t.Helper()
	var got string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Authorization") }))
	defer origin.Close()
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr})}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://api.test:"+strconv.Itoa(port)+"/", nil)
	req.Header.Set("Authorization", e.secret.Placeholder)
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return got
}

func TestInterceptForwardingTLSOnlySecretKeepsPlaceholder(t *testing.T) {
	e := startIntercept(t)
	if got := e.plainGet(t); got != e.secret.Placeholder {
		t.Fatalf("cleartext Authorization %q, want the placeholder", got)
	}
}

func TestInterceptForwardingAllowHTTPSecretGetsValue(t *testing.T) {
	e := startIntercept(t)
	s := e.secret
	s.AllowHTTP = true
	if err := e.sp.SetSecrets([]secretproxy.Secret{s}); err != nil {
		t.Fatal(err)
	}
	if got := e.plainGet(t); got != interceptValue {
		t.Fatalf("cleartext Authorization %q, want the value", got)
	}
}

func TestInterceptConnectWithOtherSNIClosed(t *testing.T) {
	e := startIntercept(t)
	c, resp := e.connect(t, "api.test:"+strconv.Itoa(e.upPort))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a ClientHello for other.test in a tunnel to api.test was served")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.auth) != 0 {
		t.Fatal("the upstream got a request")
	}
}

// connect sends CONNECT target to the egress proxy on a new connection
// and returns it (closed when the test ends) with the response.
func (e *interceptEnv) connect(t *testing.T, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}
