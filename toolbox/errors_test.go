package toolbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// rawServer answers every request with status, content type and body.
func rawServer(t *testing.T, status int, ctype, body string) *toolbox.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, strings.ReplaceAll(body, "$AUTH", r.Header.Get("Authorization")))
	}))
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: srv.URL + "/toolbox/sb-1", Token: "dtn_topsecret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

func TestAPIErrorShapes(t *testing.T) {
	long := strings.Repeat("x", 100000)
	for _, tc := range []struct {
		name        string
		status      int
		ctype, body string
		code, msg   string
		is          error
	}{
		{"daemon", 404, "application/json", `{"statusCode":404,"message":"not found: session not found","code":"NOT_FOUND","timestamp":"t","path":"/p","method":"GET","extra":1}`, "NOT_FOUND", "not found: session not found", sandbox.ErrNotFound},
		{"gone", 410, "application/json", `{"statusCode":410,"message":"gone: command has already completed","code":"GONE"}`, "GONE", "gone: command has already completed", sandbox.ErrExited},
		{"empty body", 404, "", ``, "", "Not Found", sandbox.ErrNotFound},
		{"gin text", 404, "text/plain", "404 page not found", "", "404 page not found", sandbox.ErrNotFound},
		{"error keys", 400, "application/json", `{"error":"bad thing","error_code":"GIT_AUTH_FAILED"}`, "GIT_AUTH_FAILED", "bad thing", nil},
		{"nestjs", 400, "application/json", `{"statusCode":400,"error":"Bad Request","message":["name must be a string","x"]}`, "", "name must be a string; x", nil},
		{"wrapped 500", 500, "application/json", `{"statusCode":500,"message":"failed: boom","timestamp":"0001-01-01T00:00:00Z","path":""}`, "", "failed: boom", nil},
		{"empty 502", 502, "", ``, "", "Bad Gateway", nil},
		{"json not object", 500, "application/json", `"just a string"`, "", `"just a string"`, nil},
		{"bulk upload", 400, "application/json", `{"errors":["a: denied","b: denied"],"files":[]}`, "", "a: denied; b: denied", nil},
		{"huge", 500, "text/plain", long, "", long[:64<<10], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawServer(t, tc.status, tc.ctype, tc.body)
			_, err := c.Version(context.Background())
			var ae *toolbox.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if ae.StatusCode != tc.status || ae.Code != tc.code || ae.Message != tc.msg {
				t.Errorf("APIError = %d %q %q, want %d %q %q", ae.StatusCode, ae.Code, truncated(ae.Message), tc.status, tc.code, truncated(tc.msg))
			}
			if ae.Method != "GET" || ae.Path != "/toolbox/sb-1/version" {
				t.Errorf("request = %s %s", ae.Method, ae.Path)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			for _, s := range []error{sandbox.ErrNotFound, sandbox.ErrExited} {
				if s != tc.is && errors.Is(err, s) {
					t.Errorf("errors.Is(err, %v) = true for status %d", s, tc.status)
				}
			}
			if n := len(err.Error()); n > 1000 {
				t.Errorf("message of %d bytes, want it cut", n)
			}
		})
	}
}

func truncated(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s…(%d)", s[:40], len(s))
	}
	return s
}

func TestTokenNeverInErrors(t *testing.T) {
	c := rawServer(t, 401, "application/json", `{"message":"unauthorized: bad header $AUTH"}`)
	_, err := c.Version(context.Background())
	var ae *toolbox.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "topsecret") || strings.Contains(string(ae.Body), "topsecret") {
		t.Fatalf("token leaked: %v / %s", err, ae.Body)
	}
	if !strings.Contains(err.Error(), "Bearer REDACTED") {
		t.Errorf("error %q lost the rest of the message", err)
	}

	// A redirect to another host never carries the token.
	var leaked string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Header.Get("Authorization")
		io.WriteString(w, `{"version":"elsewhere"}`)
	}))
	defer other.Close()
	home := httptest.NewServer(http.RedirectHandler(strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/version", http.StatusFound))
	defer home.Close()
	c2, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: home.URL, Token: "dtn_topsecret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if v, err := c2.Version(context.Background()); err != nil || v != "elsewhere" {
		t.Fatalf("Version via redirect = %q, %v", v, err)
	}
	if leaked != "" {
		t.Fatalf("redirect target got Authorization %q", leaked)
	}

	// Transport errors name the request, not the token.
	c3, err := toolbox.NewClient(toolbox.ClientOptions{Socket: "/nonexistent/sock", Token: "dtn_topsecret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_, err = c3.Version(context.Background())
	if err == nil || strings.Contains(err.Error(), "topsecret") || !strings.Contains(err.Error(), "/version") {
		t.Fatalf("dial error = %v", err)
	}
}
