package secretproxy

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const testValue = "sk-live-0123456789abcdef"

// get sends GET url with header Authorization: Bearer auth (if not "").
func (e *env) get(rawURL, auth string) (int, string) {
	e.t.Helper()
	req := newRequest(e.t, "GET", rawURL, nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	return e.do(e.client(), req)
}

// only returns the one request the upstream received.
func (e *env) only() received {
	e.t.Helper()
	got := e.up.requests()
	if len(got) != 1 {
		e.t.Fatalf("the upstream received %d requests, want 1", len(got))
	}
	return got[0]
}

func TestValueReachesAllowedHostInHeader(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	if code, _ := e.get("https://api.test/v1", s.Placeholder); code != 200 {
		t.Fatalf("status %d", code)
	}
	if got := e.only().Header.Get("Authorization"); got != "Bearer "+testValue {
		t.Fatalf("Authorization = %q, want the value", got)
	}
}

func TestValueReachesAllowedHostInQuery(t *testing.T) {
	s := secret("API_KEY", "a b&c", "api.test")
	e := startEnv(t, nil, s)
	e.get("https://api.test/v1/"+s.Placeholder+"?key="+s.Placeholder+"&x=1", "")
	u, err := url.ParseRequestURI(e.only().URI)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/v1/a b&c" || u.Query().Get("key") != "a b&c" || u.Query().Get("x") != "1" {
		t.Fatalf("upstream URI %q: want the value, escaped, in the path and the query", e.only().URI)
	}
}

func TestValueReachesAllowedHostInBody(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	e.do(e.client(), newRequest(t, "POST", "https://api.test/v1", strings.NewReader(`{"key":"`+s.Placeholder+`"}`)))
	if got := e.only().Body; got != `{"key":"`+testValue+`"}` {
		t.Fatalf("body %q, want the value", got)
	}
}

func TestValueReachesAllowedHostInChunkedBody(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	// A reader of unknown length: the client sends it chunked.
	body := io.MultiReader(strings.NewReader("key="), strings.NewReader(s.Placeholder))
	e.do(e.client(), newRequest(t, "POST", "https://api.test/v1", body))
	if got := e.only().Body; got != "key="+testValue {
		t.Fatalf("body %q, want the value", got)
	}
}

func TestBodyLongerThanMaxBodyUnchanged(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	long := s.Placeholder + strings.Repeat("x", DefaultMaxBody)
	e.do(e.client(), newRequest(t, "POST", "https://api.test/v1", strings.NewReader(long)))
	if got := e.only().Body; got != long {
		t.Fatalf("a body longer than MaxBody changed (%d bytes)", len(got))
	}
}

func TestValueReachesAllowedHostInBasicAuth(t *testing.T) {
	s := secret("DB_PASSWORD", testValue, "api.test")
	e := startEnv(t, nil, s)
	req := newRequest(t, "GET", "https://api.test/", nil)
	req.SetBasicAuth("me", s.Placeholder)
	e.do(e.client(), req)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+testValue))
	if got := e.only().Header.Get("Authorization"); got != want {
		t.Fatalf("Authorization = %q, want %q", got, want)
	}
}

func TestPlaceholderToOtherHostUnchangedWithEvent(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	e.get("https://other.test/v1", s.Placeholder)
	if e.up.contains(testValue) {
		t.Fatal("the value reached a host the secret does not allow")
	}
	if got := e.only().Header.Get("Authorization"); got != "Bearer "+s.Placeholder {
		t.Fatalf("Authorization = %q, want the placeholder unchanged", got)
	}
	e.wantEvent("API_KEY", "does not allow")
}

func TestEventsHoldNoPlaceholderNorValue(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	e.get("https://other.test/"+s.Placeholder, s.Placeholder)
	e.get("http://api.test/"+s.Placeholder, s.Placeholder)
	if len(e.eventList()) == 0 {
		t.Fatal("no events")
	}
	for _, ev := range e.eventList() {
		all := ev.Reason + ev.Host + ev.Secret + ev.Protocol
		if strings.Contains(all, s.Placeholder) || strings.Contains(all, testValue) {
			t.Fatalf("event %+v holds the placeholder or the value", ev)
		}
	}
}

func TestCleartextToTLSOnlyHostGetsPlaceholder(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	e.get("http://api.test/v1", s.Placeholder)
	if got := e.only().Header.Get("Authorization"); got != "Bearer "+s.Placeholder {
		t.Fatalf("Authorization = %q, want the placeholder over cleartext", got)
	}
	e.wantEvent("API_KEY", "cleartext")
}

func TestAllowHTTPOverCleartext(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	s.AllowHTTP = true
	e := startEnv(t, nil, s)
	e.get("http://api.test/v1", s.Placeholder)
	if got := e.only().Header.Get("Authorization"); got != "Bearer "+testValue {
		t.Fatalf("Authorization = %q, want the value", got)
	}
}

func TestWildcardHosts(t *testing.T) {
	s := secret("API_KEY", testValue, "*.example.test")
	e := startEnv(t, nil, s)
	for host, want := range map[string]string{"a.example.test": testValue, "a.b.example.test": testValue, "example.test": s.Placeholder, "badexample.test": s.Placeholder} {
		e.up.reset()
		e.get("https://"+host+"/", s.Placeholder)
		if got := e.only().Header.Get("Authorization"); got != "Bearer "+want {
			t.Errorf("%s got Authorization %q, want %q", host, got, "Bearer "+want)
		}
	}
}

func TestSetSecretsRotatesValue(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := e.client()
	req := func() {
		r := newRequest(t, "GET", "https://api.test/", nil)
		r.Header.Set("Authorization", s.Placeholder)
		e.do(c, r)
	}
	req()
	rotated := s
	rotated.Value = "rotated-value"
	if err := e.p.SetSecrets([]Secret{rotated}); err != nil {
		t.Fatal(err)
	}
	req() // same connection, kept alive
	got := e.up.requests()
	if len(got) != 2 || got[0].Header.Get("Authorization") != testValue || got[1].Header.Get("Authorization") != "rotated-value" {
		t.Fatalf("upstream got %v, want the value then the rotated one", got)
	}
}

func TestSetSecretsDetach(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	c := e.client()
	if err := e.p.SetSecrets(nil); err != nil {
		t.Fatal(err)
	}
	r := newRequest(t, "GET", "https://api.test/", nil)
	r.Header.Set("Authorization", s.Placeholder)
	e.do(c, r)
	if e.up.contains(testValue) || e.p.Intercepts("api.test") {
		t.Fatal("a detached secret's value was still sent, or its host still intercepted")
	}
}

func TestSetSecretsInvalidChangesNothing(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	bad := []Secret{{Name: "1BAD", Placeholder: NewPlaceholder(), Value: "value-zzz", Hosts: []string{"x.test"}}, {Name: "OK", Placeholder: "short", Value: "value-zzz", Hosts: []string{"x.test"}}}
	for _, b := range bad {
		err := e.p.SetSecrets([]Secret{b})
		if err == nil || strings.Contains(err.Error(), b.Value) {
			t.Fatalf("SetSecrets(%v) = %v, want an error without the value", b, err)
		}
	}
	if !e.p.Intercepts("api.test") || e.p.Intercepts("x.test") {
		t.Fatal("a refused SetSecrets changed the secrets")
	}
}

func TestUntrustedUpstreamGets502AndNoValue(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnvWith(t, nil, newTestCA(t).pool(), s)
	code, body := e.get("https://api.test/", s.Placeholder)
	if code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", code)
	}
	if len(e.up.requests()) != 0 || strings.Contains(body, testValue) {
		t.Fatalf("the upstream with an untrusted certificate received %d requests", len(e.up.requests()))
	}
}

func TestKeepAliveReusesUpstreamConnection(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, nil, s)
	for range 3 {
		e.get("https://api.test/", s.Placeholder)
	}
	if n := e.up.conns.Load(); n != 1 {
		t.Fatalf("3 requests made %d upstream connections, want 1", n)
	}
}

func TestResponseHeaderScrubbed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	}, s)
	resp, err := e.client().Do(func() *http.Request {
		r := newRequest(t, "GET", "https://api.test/", nil)
		r.Header.Set("Authorization", s.Placeholder)
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Echo"); got != s.Placeholder {
		t.Fatalf("echoed header %q, want the placeholder back", got)
	}
}

func TestResponseBodyScrubbed(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "you sent "+r.Header.Get("Authorization")+".")
	}, s)
	if _, body := e.get("https://api.test/", s.Placeholder); body != "you sent Bearer "+s.Placeholder+"." {
		t.Fatalf("body %q, want the placeholder back", body)
	}
}

func TestLongResponseBodyScrubbedStreaming(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	pad := strings.Repeat("y", DefaultMaxBody)
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0") // replaced below
		body := pad + testValue + pad
		w.Header().Set("Content-Length", itoa(len(body)))
		_, _ = io.WriteString(w, body)
	}, s)
	_, body := e.get("https://api.test/", "")
	if body != pad+string(maskFor(s.Placeholder, len(testValue)))+pad {
		t.Fatalf("a long body was not scrubbed to the mask (%d bytes, value in it: %t)", len(body), strings.Contains(body, testValue))
	}
}

func TestChunkedResponseBodyScrubbedStreaming(t *testing.T) {
	s := secret("API_KEY", testValue, "api.test")
	e := startEnv(t, func(w http.ResponseWriter, r *http.Request) {
		for _, part := range []string{"a", testValue[:5], testValue[5:], "b"} {
			_, _ = io.WriteString(w, part)
			w.(http.Flusher).Flush() // chunked, in pieces
		}
	}, s)
	if _, body := e.get("https://api.test/", ""); body != "a"+s.Placeholder+"b" {
		t.Fatalf("a chunked body scrubbed to %q, want the placeholder", body)
	}
}
