package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// listenerHarness is a server with the default preview URLs over a fake
// engine whose sandboxes serve an app on port 8080 that echoes what it
// is asked, with one started sandbox, named web.
func listenerHarness(t *testing.T) (*harness, apiSandbox) {
	t.Helper()
	eng := newFakeEngine(t)
	eng.serveOn(8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s token=%q", r.URL.RequestURI(), r.Header.Get(previewTokenHeader))
	}))
	h := newHarness(t, eng, harnessOptions{listenerPreviews: true})
	sb := h.create(map[string]any{"name": "web"})
	h.waitState(sb.ID, stateStarted)
	return h, sb
}

// previewGet GETs u with header (if any), and returns the status and body.
func previewGet(t *testing.T, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

// TestPreviewListenerURL: by default a preview URL is a loopback address
// and port of the server's, no DNS needed, the same on every call.
func TestPreviewListenerURL(t *testing.T) {
	h, sb := listenerHarness(t)
	var link, again portPreviewURL
	if st := h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link); st != http.StatusOK {
		t.Fatalf("preview-url: %d", st)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() || u.Port() == "" || u.Path != "" {
		t.Fatalf("preview url %q: want http://LOOPBACK-IP:PORT", link.URL)
	}
	h.call("GET", "/sandbox/"+sb.ID+"/ports/8080/preview-url", nil, &again)
	if again.URL != link.URL {
		t.Fatalf("second preview url %q, want the first, %q", again.URL, link.URL)
	}
}

// TestPreviewListenerToken: a listener's requests need the preview token
// (header or query parameter), which does not reach the app; without it,
// or with another, they are 401.
func TestPreviewListenerToken(t *testing.T) {
	h, _ := listenerHarness(t)
	var link portPreviewURL
	h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link)
	if st, body := previewGet(t, link.URL+"/x", nil); st != http.StatusUnauthorized || !strings.Contains(body, previewTokenHeader) {
		t.Errorf("without the token: %d %s, want 401 naming the header", st, body)
	}
	if st, _ := previewGet(t, link.URL+"/x", http.Header{previewTokenHeader: {"wrong"}}); st != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d, want 401", st)
	}
	if st, body := previewGet(t, link.URL+"/x?a=1", http.Header{previewTokenHeader: {link.Token}}); st != http.StatusOK || body != `app /x?a=1 token=""` {
		t.Errorf("with the token: %d %q", st, body)
	}
	if st, body := previewGet(t, link.URL+"/q?"+previewTokenQuery+"="+link.Token, nil); st != http.StatusOK || body != `app /q token=""` {
		t.Errorf("with the token in the query: %d %q", st, body)
	}
}

// TestPreviewListenerSigned: a signed URL is the listener's URL and the
// token, which needs nothing else and is stripped before the app; once
// expired it is 401 (or 404, once swept), and a token of another port is
// no token of this one.
func TestPreviewListenerSigned(t *testing.T) {
	h, _ := listenerHarness(t)
	var link portPreviewURL
	var signed, other signedPortPreviewURL
	h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link)
	if st := h.call("GET", "/sandbox/web/ports/8080/signed-preview-url?expiresInSeconds=60", nil, &signed); st != http.StatusOK || signed.URL != link.URL+"/"+signed.Token {
		t.Fatalf("signed-preview-url: %d %+v, want %s/TOKEN", st, signed, link.URL)
	}
	if st, body := previewGet(t, signed.URL+"/s?b=2", nil); st != http.StatusOK || body != `app /s?b=2 token=""` {
		t.Errorf("signed preview: %d %q", st, body)
	}
	if st, body := previewGet(t, signed.URL, nil); st != http.StatusOK || body != `app / token=""` {
		t.Errorf("signed preview, no path: %d %q", st, body)
	}
	h.call("GET", "/sandbox/web/ports/9090/signed-preview-url", nil, &other)
	if st, _ := previewGet(t, link.URL+"/"+other.Token, nil); st != http.StatusUnauthorized {
		t.Errorf("a token of port 9090 on port 8080's listener: %d, want 401", st)
	}
	if st := h.call("POST", "/sandbox/web/ports/8080/signed-preview-url/"+signed.Token+"/expire", nil, nil); st != http.StatusOK {
		t.Fatalf("expire: %d", st)
	}
	if st, _ := previewGet(t, signed.URL+"/s", nil); st != http.StatusUnauthorized {
		t.Errorf("an expired signed preview: %d, want 401", st)
	}
}

// waitRefused waits until nothing listens at u's address any more.
func waitRefused(t *testing.T, u string) {
	t.Helper()
	pu, _ := url.Parse(u)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", pu.Host)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still listens", pu.Host)
		}
	}
}

// TestPreviewListenersClosed: a sandbox's preview listeners close when it
// stops, and when it is deleted; a new URL is made after a start; the
// server's close with it.
func TestPreviewListenersClosed(t *testing.T) {
	h, sb := listenerHarness(t)
	var link portPreviewURL
	h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link)
	if st := h.call("POST", "/sandbox/web/stop", nil, nil); st != http.StatusOK {
		t.Fatalf("stop: %d", st)
	}
	h.waitState(sb.ID, stateStopped)
	if n := h.s.previews.listeners.count(sb.ID); n != 0 {
		t.Errorf("preview listeners of a stopped sandbox: %d, want 0", n)
	}
	waitRefused(t, link.URL)
	h.call("POST", "/sandbox/web/start", nil, nil)
	h.waitState(sb.ID, stateStarted)
	h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link)
	if st, _ := previewGet(t, link.URL, http.Header{previewTokenHeader: {link.Token}}); st != http.StatusOK {
		t.Errorf("preview after a restart: %d", st)
	}
	h.call("DELETE", "/sandbox/web", nil, nil)
	h.waitState(sb.ID, "gone")
	if n := h.s.previews.listeners.count(""); n != 0 {
		t.Errorf("preview listeners after the delete: %d, want 0", n)
	}
	waitRefused(t, link.URL)

	other := h.create(map[string]any{"name": "other"})
	h.waitState(other.ID, stateStarted)
	h.call("GET", "/sandbox/other/ports/8080/preview-url", nil, &link)
	if err := h.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.s.previews.listeners.count(""); n != 0 {
		t.Errorf("preview listeners after the server's Close: %d, want 0", n)
	}
	waitRefused(t, link.URL)
}

// TestPreviewListenerCaps: past a sandbox's cap of listeners a preview
// URL is 429, past the server's 503, saying why; no listener is made.
func TestPreviewListenerCaps(t *testing.T) {
	h, _ := listenerHarness(t)
	h.s.previews.listeners.perSandbox = 2
	h.s.previews.listeners.max = 3
	two := h.create(map[string]any{"name": "two"})
	h.waitState(two.ID, stateStarted)
	for _, p := range []string{"8080", "8081"} {
		if st := h.call("GET", "/sandbox/web/ports/"+p+"/preview-url", nil, nil); st != http.StatusOK {
			t.Fatalf("preview-url of port %s: %d", p, st)
		}
	}
	var e errorBody
	if st := h.call("GET", "/sandbox/web/ports/8082/preview-url", nil, &e); st != http.StatusTooManyRequests || !strings.Contains(e.Message, "ports") {
		t.Errorf("a third port of one sandbox: %d %q, want 429 saying why", st, e.Message)
	}
	if st := h.call("GET", "/sandbox/web/ports/8082/signed-preview-url", nil, &e); st != http.StatusTooManyRequests {
		t.Errorf("a signed URL of a third port: %d, want 429", st)
	}
	if st := h.call("GET", "/sandbox/two/ports/8080/preview-url", nil, nil); st != http.StatusOK {
		t.Fatalf("preview-url of another sandbox: %d", st)
	}
	if st := h.call("GET", "/sandbox/two/ports/8081/preview-url", nil, &e); st != http.StatusServiceUnavailable || !strings.Contains(e.Message, "--preview-domain") {
		t.Errorf("past the server's cap: %d %q, want 503 saying why", st, e.Message)
	}
	if n := h.s.previews.listeners.count(""); n != 3 {
		t.Errorf("listeners: %d, want 3", n)
	}
	h.s.mu.Lock()
	n := len(h.s.signed)
	h.s.mu.Unlock()
	if n != 0 {
		t.Errorf("signed tokens after a refused signed URL: %d, want 0", n)
	}
}

// TestPreviewDomainOption: with a preview domain, URLs are host-based
// under it (the server's port added when it has none) and no listener is
// made; a domain that is no host name is refused.
func TestPreviewDomainOption(t *testing.T) {
	eng := newFakeEngine(t)
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "web"})
	h.waitState(sb.ID, stateStarted)
	port := h.url[strings.LastIndex(h.url, ":")+1:]
	for _, c := range []struct{ domain, want string }{
		{"preview.example.com", "http://8080-" + sb.ID + ".preview.example.com:" + port},
		{"preview.example.com:80", "http://8080-" + sb.ID + ".preview.example.com:80"},
	} {
		h.s.previewDomainOpt = c.domain
		var link portPreviewURL
		if h.call("GET", "/sandbox/web/ports/8080/preview-url", nil, &link); link.URL != c.want {
			t.Errorf("domain %s: url %q, want %q", c.domain, link.URL, c.want)
		}
	}
	if n := h.s.previews.listeners.count(""); n != 0 {
		t.Errorf("listeners with a preview domain: %d, want 0", n)
	}
	for _, bad := range []string{"http://x.example.com", "x.example.com/p", ".example.com", "x.example.com:port", "*.example.com"} {
		if err := checkPreviewDomain(bad); err == nil {
			t.Errorf("preview domain %q accepted", bad)
		}
	}
}

// TestPreviewListenerOwnLoopback: each sandbox's preview listeners have a
// loopback address of their own (browsers scope cookies by host, not by
// port: one address would let one sandbox's app read another's cookies),
// shared by the ports of that sandbox; each reaches its own sandbox.
func TestPreviewListenerOwnLoopback(t *testing.T) {
	h, _ := listenerHarness(t)
	other := h.create(map[string]any{"name": "web2"})
	h.waitState(other.ID, stateStarted)
	link := func(name string, port int) (portPreviewURL, *url.URL) {
		var l portPreviewURL
		if st := h.call("GET", fmt.Sprintf("/sandbox/%s/ports/%d/preview-url", name, port), nil, &l); st != http.StatusOK {
			t.Fatalf("preview-url of %s:%d: %d", name, port, st)
		}
		u, err := url.Parse(l.URL)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Fatalf("preview url %q of %s: want a loopback address", l.URL, name)
		}
		return l, u
	}
	_, web := link("web", 8080)
	_, web9090 := link("web", 9090)
	l2, web2 := link("web2", 8080)
	if web.Hostname() != web9090.Hostname() {
		t.Errorf("one sandbox's ports on %s and %s, want one address", web.Hostname(), web9090.Hostname())
	}
	if web.Hostname() == web2.Hostname() {
		t.Errorf("two sandboxes' previews share the address %s (and so their cookies)", web.Hostname())
	}
	if st, body := previewGet(t, l2.URL+"/x", http.Header{previewTokenHeader: {l2.Token}}); st != http.StatusOK || body != `app /x token=""` {
		t.Errorf("the second sandbox's listener: %d %q", st, body)
	}
}
