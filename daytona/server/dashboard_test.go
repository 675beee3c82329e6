package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server/dashboard"
)

// dashClient sends requests to a dashboard test server.
type dashClient struct {
	t   *testing.T
	url string
}

// newDashServer starts a server over the fake engine with the keys of
// stateDir (and, when keyed, the test key).
func newDashServer(t *testing.T, stateDir string, keyed bool) (*Server, *dashClient) {
	t.Helper()
	opts := Options{StateDir: stateDir}
	if keyed {
		opts.APIKeys = []string{testKey}
	}
	s, srv := serveTest(t, opts, newFakeEngine(t))
	return s, &dashClient{t: t, url: srv.URL}
}

// do sends method path with body (JSON unless a string) and headers
// (name, value pairs) and returns the answer, read.
func (c *dashClient) do(method, path string, body any, hdr ...string) (*http.Response, []byte) {
	c.t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/x-www-form-urlencoded"
	default:
		data, _ := json.Marshal(b)
		rd, ct = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// login logs in with key and returns the cookie header and the session.
func (c *dashClient) login(key string) (cookie string, sess dashboardSession) {
	c.t.Helper()
	resp, data := c.do("POST", "/dashboard/login", map[string]string{"key": key})
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("login: %d %s", resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &sess); err != nil || sess.CSRFToken == "" {
		c.t.Fatalf("login answer %s: %v", data, err)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		c.t.Fatalf("login set %d cookies", len(cookies))
	}
	ck := cookies[0]
	if ck.Name != dashboardCookie || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure {
		c.t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", ck)
	}
	return ck.Name + "=" + ck.Value, sess
}

// checkHeaders fails unless resp has the dashboard's security headers.
func checkHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	if got := resp.Header.Get("Content-Security-Policy"); got != dashboardCSP {
		t.Errorf("%s: CSP %q, want %q", what, got, dashboardCSP)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s: headers %v: want nosniff and no-referrer", what, resp.Header)
	}
}

// dashboardFiles are the names of the dashboard's files.
func dashboardFiles(t *testing.T) []string {
	t.Helper()
	var names []string
	err := fs.WalkDir(dashboard.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil || len(names) < 5 {
		t.Fatalf("dashboard files %v: %v", names, err)
	}
	return names
}

// Without a session every page but the login page's, and every API call,
// is refused; with one, only its organization's sandboxes are seen, and
// only with the CSRF token; the CSP is on every answer.
func TestDashboardRefusals(t *testing.T) {
	dir := t.TempDir()
	keyA := newOrgKey(t, dir, "alice", "team-a")
	keyB := newOrgKey(t, dir, "bob", "team-b")
	_, c := newDashServer(t, dir, false)
	var sbB, sbA apiSandbox
	for _, x := range []struct {
		key string
		sb  *apiSandbox
	}{{keyB, &sbB}, {keyA, &sbA}} {
		resp, data := c.do("POST", "/api/sandbox", map[string]any{}, "Authorization", "Bearer "+x.key)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, x.sb) != nil {
			t.Fatalf("create: %d %s", resp.StatusCode, data)
		}
	}
	bogus := dashboardCookie + "=" + strings.Repeat("ab", 32)
	for _, name := range append(dashboardFiles(t), "") {
		for _, cookie := range []string{"", bogus} {
			resp, _ := c.do("GET", "/dashboard/"+name, nil, "Cookie", cookie)
			checkHeaders(t, name, resp)
			public := slices.Contains(dashboardPublic, name)
			switch {
			case public && resp.StatusCode != http.StatusOK:
				t.Errorf("public %s: %d, want 200", name, resp.StatusCode)
			case !public && name != "" && name != "index.html" && resp.StatusCode != http.StatusUnauthorized:
				t.Errorf("%s with cookie %q: %d, want 401", name, cookie, resp.StatusCode)
			case (name == "" || name == "index.html") && (resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login.html"):
				t.Errorf("%s with cookie %q: %d to %q, want 303 to the login page", name, cookie, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
	}
	for _, p := range []string{"/dashboard/session", "/dashboard/keys", "/api/sandbox", "/api/sandbox/" + sbA.ID, "/toolbox/" + sbA.ID + "/version"} {
		if resp, _ := c.do("GET", p, nil, "Cookie", bogus, csrfHeader, "x"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong cookie: %d, want 401", p, resp.StatusCode)
		}
	}
	if resp, _ := c.do("POST", "/dashboard/login", map[string]string{"key": "dtn_wrong"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong key: %d", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/dashboard/login", "key="+keyA); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("login with a form: %d, want 415", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/dashboard/login", map[string]string{"key": keyA}, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", resp.StatusCode)
	}

	cookie, sess := c.login(keyA)
	if sess.OrganizationID != "team-a" || sess.KeyName != "alice" {
		t.Fatalf("session %+v", sess)
	}
	tok := sess.CSRFToken
	for _, name := range dashboardFiles(t) {
		if resp, _ := c.do("GET", "/dashboard/"+name, nil, "Cookie", cookie); resp.StatusCode != http.StatusOK {
			t.Errorf("%s with a session: %d", name, resp.StatusCode)
		}
	}
	for _, hdr := range [][]string{{"Cookie", cookie}, {"Cookie", cookie, csrfHeader, "wrong"}, {"Cookie", cookie, csrfHeader, ""}} {
		if resp, _ := c.do("GET", "/api/sandbox", nil, hdr...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/sandbox with %v: %d, want 401 without the CSRF token", hdr, resp.StatusCode)
		}
	}
	ok := []string{"Cookie", cookie, csrfHeader, tok}
	resp, data := c.do("GET", "/api/sandbox", nil, ok...)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), sbA.ID) || strings.Contains(string(data), sbB.ID) {
		t.Fatalf("list with the session: %d %s: want team-a's sandbox only", resp.StatusCode, data)
	}
	for _, p := range []string{"/api/sandbox/" + sbB.ID, "/toolbox/" + sbB.ID + "/version", "/api/sandbox/" + sbB.ID + "/network"} {
		if resp, _ := c.do("GET", p, nil, ok...); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s (another organization's): %d, want 404", p, resp.StatusCode)
		}
	}
	waitFakeStarted(t, c, sbA.ID, ok)
	if resp, data := c.do("GET", "/toolbox/"+sbA.ID+"/version", nil, ok...); resp.StatusCode != http.StatusOK {
		t.Errorf("toolbox through the proxy with the session: %d %s", resp.StatusCode, data)
	}
	// State-changing requests: the token is needed, and a cross-site
	// request is refused even with it.
	stop := "/api/sandbox/" + sbA.ID + "/stop"
	if resp, _ := c.do("POST", stop, nil, "Cookie", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the CSRF token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.do("POST", stop, nil, "Cookie", cookie, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST without the CSRF token: %d, want 403", resp.StatusCode)
	}
	if resp, _ := c.do("POST", stop, nil, "Cookie", cookie, csrfHeader, tok, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d, want 403", resp.StatusCode)
	}
	// WebSocket upgrades: the token in the query and this server's Origin.
	host := strings.TrimPrefix(c.url, "http://")
	ws := "/toolbox/" + sbA.ID + "/process/pty/x/connect?csrf=" + url.QueryEscape(tok)
	for _, hdr := range [][]string{
		{"Cookie", cookie, "Upgrade", "websocket", "Connection", "Upgrade"},
		{"Cookie", cookie, "Upgrade", "websocket", "Connection", "Upgrade", "Origin", "http://evil.example"},
	} {
		if resp, _ := c.do("GET", ws, nil, hdr...); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("WebSocket upgrade with %v: %d, want 401 or 403", hdr, resp.StatusCode)
		}
	}
	if resp, _ := c.do("GET", "/toolbox/"+sbA.ID+"/process/pty/x/connect", nil, "Cookie", cookie, "Upgrade", "websocket", "Connection", "Upgrade", "Origin", "http://"+host); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("WebSocket upgrade without ?csrf=: %d, want 401", resp.StatusCode)
	}
	// Logout ends the session; removing its key ends another.
	if resp, _ := c.do("POST", "/dashboard/logout", nil, ok...); resp.StatusCode != http.StatusOK {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/api/sandbox", nil, ok...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", resp.StatusCode)
	}
	cookie, sess = c.login(keyA)
	if err := RemoveAPIKey(context.Background(), dir, "alice"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c.do("GET", "/api/sandbox", nil, "Cookie", cookie, csrfHeader, sess.CSRFToken); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after its key was removed: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/dashboard/session", nil, "Cookie", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("session after its key was removed: %d, want 401", resp.StatusCode)
	}
	// Bearer keys work as before.
	if resp, _ := c.do("GET", "/api/sandbox/"+sbB.ID, nil, "Authorization", "Bearer "+keyB); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer key: %d", resp.StatusCode)
	}
}

// waitFakeStarted waits until sandbox id is started.
func waitFakeStarted(t *testing.T, c *dashClient, id string, hdr []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sb apiSandbox
		_, data := c.do("GET", "/api/sandbox/"+id, nil, hdr...)
		if json.Unmarshal(data, &sb) == nil && sb.State == stateStarted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: %s", id, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A server without keys shows the dashboard on loopback names only, with
// no login.
func TestDashboardWithoutKeys(t *testing.T) {
	_, c := newDashServer(t, t.TempDir(), false)
	resp, data := c.do("GET", "/dashboard/session", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"csrfToken":""`) {
		t.Fatalf("session without keys: %d %s", resp.StatusCode, data)
	}
	if resp, _ := c.do("GET", "/dashboard/", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("dashboard without keys: %d", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/dashboard/login", map[string]string{"key": "x"}); resp.StatusCode != http.StatusConflict {
		t.Errorf("login without keys: %d, want 409", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", c.url+"/dashboard/", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("dashboard without keys under another host name: %d, want 421", resp.StatusCode)
	}
}

// The proxies never hand the dashboard's cookie or token to a sandbox.
func TestDropDashboardCredentials(t *testing.T) {
	h := http.Header{}
	h.Add("Cookie", "app=1; "+dashboardCookie+"=secret")
	h.Add("Cookie", "other=2")
	h.Set(csrfHeader, "token")
	dropDashboardCredentials(h)
	if got := h.Get("Cookie"); got != "app=1; other=2" || h.Get(csrfHeader) != "" {
		t.Fatalf("after drop: Cookie %q, token %q", got, h.Get(csrfHeader))
	}
	h = http.Header{"Cookie": {dashboardCookie + "=secret"}}
	dropDashboardCredentials(h)
	if _, ok := h["Cookie"]; ok {
		t.Fatalf("a Cookie header of the session alone is kept: %v", h)
	}
}
