package secretproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Escape probes: a sandbox that tries to get a value to a host its
// secret does not allow.

// noValueElsewhere fails the test when the upstream received the value
// in a request whose Host is not allowed.
func noValueElsewhere(t *testing.T, e *env, allowed string) {
	t.Helper()
	for _, r := range e.up.requests() {
		if !strings.EqualFold(strings.Split(r.Host, ":")[0], allowed) && (strings.Contains(fmt.Sprint(r.Header), testValue) || strings.Contains(r.URI+r.Body, testValue)) {
			t.Fatalf("the value reached host %q", r.Host)
		}
	}
}

func TestProbeSpoofedHostGets421(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	resp, err := e.raw("api.test", "api.test", true, "GET / HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer "+s.Placeholder+"\r\nConnection: close\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp, "HTTP/1.1 421 ") || len(e.up.requests()) != 0 {
		t.Fatalf("answer %q, upstream got %d requests: want 421 and nothing sent", firstLine(resp), len(e.up.requests()))
	}
	e.wantEvent("", "names the host other.test")
}

func TestProbeAbsoluteURIOtherHostGets421(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	resp, _ := e.raw("api.test", "api.test", true, "GET https://other.test/ HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+s.Placeholder+"\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(resp, "HTTP/1.1 421 ") || len(e.up.requests()) != 0 {
		t.Fatalf("answer %q, upstream got %d requests: want 421 and nothing sent", firstLine(resp), len(e.up.requests()))
	}
}

func TestProbeSpoofedSNIClosed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	// The connection goes to other.test (not allowed); its ClientHello
	// names api.test.
	if _, err := e.raw("other.test", "api.test", true, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n"); err == nil {
		t.Fatal("a ClientHello naming another host than the connection's was served")
	}
	if len(e.up.requests()) != 0 || !e.hasEvent("", "TLS server name api.test") {
		t.Fatalf("upstream got %d requests; events %+v", len(e.up.requests()), e.eventList())
	}
}

func TestProbeRedirectReturnedUnchanged(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "api.test" {
			http.Redirect(w, r, "https://other.test/landing", http.StatusFound)
		}
	}, s)
	c := e.client()
	req := newRequest(t, "GET", "https://api.test/", nil)
	req.Header.Set("Authorization", "Bearer "+s.Placeholder)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://other.test/landing" {
		t.Fatalf("status %d Location %q: want the 302 as sent", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The client follows it (as curl -L does, keeping the header).
	follow := newRequest(t, "GET", resp.Header.Get("Location"), nil)
	follow.Header.Set("Authorization", "Bearer "+s.Placeholder)
	e.do(c, follow)
	got := e.up.requests()
	if len(got) != 2 || got[1].Header.Get("Authorization") != "Bearer "+s.Placeholder {
		t.Fatalf("the redirected request got %v, want the placeholder", got)
	}
	noValueElsewhere(t, e, "api.test")
}

func TestProbePlaceholderSplitAcrossHeaders(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	half := len(s.Placeholder) / 2
	req := newRequest(t, "POST", "https://api.test/", strings.NewReader(s.Placeholder[half:]))
	req.Header.Set("X-A", s.Placeholder[:half])
	req.Header.Set("X-B", s.Placeholder[half:])
	req.Header.Add("X-A", s.Placeholder[half:])
	e.do(e.client(), req)
	if e.up.contains(testValue) {
		t.Fatal("a placeholder split across headers (or a header and the body) became the value")
	}
}

// smuggle sends a request with a smuggled second one (to other.test,
// with the placeholder) on a connection to api.test.
func smuggle(t *testing.T, raw string) *env {
	t.Helper()
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	raw = strings.ReplaceAll(raw, "PH", s.Placeholder)
	_, _ = e.raw("api.test", "api.test", true, raw)
	for _, r := range e.up.requests() {
		if r.Host != "api.test" {
			t.Fatalf("a smuggled request reached the upstream as %q", r.Host)
		}
	}
	noValueElsewhere(t, e, "api.test")
	return e
}

const smuggled = "GET / HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n"

func TestProbeSmugglingCLAndTE(t *testing.T) {
	e := smuggle(t, "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 80\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled)
	// The chunked framing wins; the smuggled request is a request of its
	// own, refused (421).
	if n := len(e.up.requests()); n != 1 {
		t.Fatalf("upstream got %d requests, want the first only", n)
	}
}

func TestProbeSmugglingDuplicateCL(t *testing.T) {
	e := smuggle(t, "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\nContent-Length: 90\r\n\r\n"+smuggled)
	if n := len(e.up.requests()); n != 0 {
		t.Fatalf("a request with two Content-Lengths reached the upstream (%d)", n)
	}
}

func TestProbeSmugglingObsFold(t *testing.T) {
	smuggle(t, "GET / HTTP/1.1\r\nHost: api.test\r\nX-Fold: a\r\n Host: other.test\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n")
}

func TestProbeSmugglingRequestInBody(t *testing.T) {
	e := smuggle(t, fmt.Sprintf("POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(smuggled)+len("PH")-2+46, smuggled))
	if n := len(e.up.requests()); n > 1 {
		t.Fatalf("a request in a body became a request (%d)", n)
	}
}

func TestLargeValue64KiB(t *testing.T) {
	big := strings.Repeat("v", 64<<10)
	s := secret("BIG", big, "api.test")
	e := startEnv(t, nil, s)
	e.do(e.client(), newRequest(t, "POST", "https://api.test/", strings.NewReader("k="+s.Placeholder)))
	e.get("https://api.test/", s.Placeholder)
	got := e.up.requests()
	if len(got) != 2 || got[0].Body != "k="+big || got[1].Header.Get("Authorization") != "Bearer "+big {
		t.Fatal("a 64 KiB value was not substituted in the body and the header")
	}
}

func TestManyConcurrentConnections(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	var wg sync.WaitGroup
	const n = 40
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			c := e.client() // a connection of its own
			req := newRequest(t, "GET", "https://api.test/", nil)
			req.Header.Set("Authorization", s.Placeholder)
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			c.CloseIdleConnections()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := len(e.up.requests()); got != n {
		t.Fatalf("upstream got %d requests, want %d", got, n)
	}
}

func TestCloseEndsServedConnections(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.p.ServeHTTP(context.Background(), a, "api.test", 80)
	}()
	e.p.Close()
	<-done
	b.Close()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

func TestUpgradeRelayedBothWays(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	var gotAuth string
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	}, s)
	c, err := e.dial("api.test", "api.test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\nAuthorization: "+s.Placeholder+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %v, %v: want 101", resp, err)
	}
	_, _ = io.WriteString(c, "ping "+s.Placeholder+"\n")
	if line, _ := br.ReadString('\n'); line != "echo ping "+s.Placeholder+"\n" {
		t.Fatalf("after the upgrade got %q: want the bytes relayed unchanged both ways", line)
	}
	if gotAuth != testValue {
		t.Fatalf("the upgrade request's Authorization %q, want the value", gotAuth)
	}
}

func TestEventQuotingAPlaceholderHostRedacted(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	_, _ = e.raw("api.test", "api.test", true, "GET / HTTP/1.1\r\nHost: "+s.Placeholder+".test\r\nConnection: close\r\n\r\n")
	e.wantEvent("", "the placeholder of API_KEY")
	for _, ev := range e.eventList() {
		if strings.Contains(ev.Reason+ev.Host, PlaceholderPrefix) {
			t.Fatalf("event %+v quotes a placeholder", ev)
		}
	}
}
