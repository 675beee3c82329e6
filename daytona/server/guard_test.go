package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// keylessServer starts a Server without API keys over eng on loopback.
func keylessServer(t *testing.T, eng engine, keys ...string) *httptest.Server {
	t.Helper()
	_, srv := serveTest(t, Options{StateDir: t.TempDir(), APIKeys: keys}, eng)
	return srv
}

// serveTest starts a Server of opts over eng on loopback, closed (server
// and listener) when the test ends.
func serveTest(t *testing.T, opts Options, eng engine) (*Server, *httptest.Server) {
	t.Helper()
	s, err := newServer(opts, eng, 5*time.Millisecond, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, srv
}

// send sends method path to srv with the headers hdr (Host: the request's
// host) and body, returning the status.
func send(t *testing.T, srv *httptest.Server, method, path string, hdr map[string]string, body string) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A web page cannot drive a keyless serve: cross-site POSTs and simple
// (text/plain, form) bodies are refused before anything is created, a
// foreign Host (DNS rebinding) is not answered, a cross-origin WebSocket
// is refused; the SDKs' requests (JSON, bodiless POSTs said to be forms,
// no Origin) and loopback hosts are.
func TestBrowserCannotDriveServe(t *testing.T) {
	eng := newFakeEngine(t)
	srv := keylessServer(t, eng)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, c := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		want               int
	}{
		{"cross-site text/plain", "POST", "/api/sandbox", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, `{}`, http.StatusForbidden},
		{"cross-site JSON", "POST", "/api/sandbox", map[string]string{"Origin": "https://evil.example", "Content-Type": "application/json"}, `{}`, http.StatusForbidden},
		{"cross-site toolbox", "POST", "/toolbox/x/process/execute", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, `{"command":"id"}`, http.StatusForbidden},
		{"text/plain without Origin", "POST", "/api/sandbox", map[string]string{"Content-Type": "text/plain"}, `{}`, http.StatusUnsupportedMediaType},
		{"form", "POST", "/api/sandbox", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, `a=b`, http.StatusUnsupportedMediaType},
		{"no Content-Type", "POST", "/api/sandbox", nil, `{}`, http.StatusUnsupportedMediaType},
		{"foreign Host", "GET", "/api/sandbox", map[string]string{"Host": "evil.example:" + port}, "", http.StatusMisdirectedRequest},
		{"foreign preview Host", "GET", "/", map[string]string{"Host": "8080-x.evil.example"}, "", http.StatusMisdirectedRequest},
		{"cross-origin WebSocket", "GET", "/api/socket.io/?EIO=4&transport=websocket", map[string]string{"Origin": "https://evil.example", "Upgrade": "websocket", "Connection": "Upgrade"}, "", http.StatusForbidden},
		{"localhost", "GET", "/api/sandbox", map[string]string{"Host": "localhost:" + port}, "", http.StatusOK},
		{"[::1]", "GET", "/api/sandbox", map[string]string{"Host": "[::1]:" + port}, "", http.StatusOK},
		{"127.0.0.1 without port", "GET", "/api/sandbox", map[string]string{"Host": "127.0.0.1"}, "", http.StatusOK},
		{"same-origin JSON", "POST", "/api/volumes", map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, `{"name":"v"}`, http.StatusOK},
		{"SDK JSON", "POST", "/api/volumes", map[string]string{"Content-Type": "application/json; charset=utf-8"}, `{"name":"w"}`, http.StatusOK},
	} {
		if got := send(t, srv, c.method, c.path, c.hdr, c.body); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if n := eng.called("create"); n != 0 {
		t.Fatalf("%d sandboxes created by refused requests", n)
	}
	// With keys, other hosts are served (the key is the proof).
	keyed := keylessServer(t, newFakeEngine(t), testKey)
	if got := send(t, keyed, "GET", "/api/sandbox", map[string]string{"Host": "serve.example", "Authorization": "Bearer " + testKey}, ""); got != http.StatusOK {
		t.Fatalf("another host with a key: %d, want 200", got)
	}
}

// An event stream that does not CONNECT with a valid key is closed at
// its deadline, though it answers pings; one that does stays open.
func TestEventStreamConnectDeadline(t *testing.T) {
	h := newHarness(t, newFakeEngine(t), harnessOptions{connectWithin: 50 * time.Millisecond})
	ok := dialEvents(t, h)
	ok.send(`40{"token":"` + testKey + `"}`)
	if m := ok.read(); !strings.HasPrefix(m, "40") {
		t.Fatalf("CONNECT with a key: %q", m)
	}
	// Dialled later, so closed after ok's deadline.
	idle := dialEvents(t, h)
	idle.send(`40{"token":"not-a-key"}`)
	// A guard against a stream never closed, far past the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, _, err := idle.conn.Read(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "no CONNECT with a valid API key") {
				t.Fatalf("the unauthenticated stream ended with %v", err)
			}
			break
		}
	}
	sb := h.create(map[string]any{"name": "after-the-deadline"})
	if m := ok.read(); !strings.Contains(m, "sandbox.created") {
		t.Fatalf("the authenticated stream after the deadline: %q", m)
	}
	h.waitState(sb.ID, stateStarted)
	h.call("DELETE", "/sandbox/"+sb.ID, nil, nil)
	h.waitState(sb.ID, "gone")
}
