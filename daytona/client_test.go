package daytona

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestNewClientCredentials(t *testing.T) {
	noDaytonaEnv(t)
	_, err := NewClient(Config{})
	if !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no key: %v, want ErrNoCredentials", err)
	}
	for _, want := range []string{"DAYTONA_API_KEY", ".env", "Config.APIKey", "DAYTONA_JWT_TOKEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no key: %q does not name %s", err, want)
		}
	}
	if _, err := NewClient(Config{JWTToken: "jwt"}); err == nil || !strings.Contains(err.Error(), "DAYTONA_ORGANIZATION_ID") {
		t.Errorf("JWT without organization: %v", err)
	}
	if _, err := NewClient(Config{APIKey: "k", APIURL: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_URL") {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := NewClient(Config{APIKey: "k", APIURL: "https://user:secret@example.com/api"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("URL with a password: %v (must fail without showing it)", err)
	}

	// A .env file fills what the environment lacks; the environment wins.
	env := "DAYTONA_API_KEY=from-file\nDAYTONA_API_URL=http://127.0.0.1:9/api\nDAYTONA_TARGET=eu\n"
	if err := os.WriteFile(filepath.Join(".", ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTarget, "us")
	c, err := NewClient(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Token() != "from-file" || c.APIURL() != "http://127.0.0.1:9/api" || c.Target() != "us" {
		t.Errorf("from .env and environment: token %q, URL %q, target %q", c.Token(), c.APIURL(), c.Target())
	}
	if os.Getenv(EnvAPIKey) != "" {
		t.Error("reading .env changed the process's environment")
	}
	c, err = NewClient(Config{APIKey: "explicit"})
	if err != nil || c.Token() != "explicit" {
		t.Errorf("an explicit key: %q, %v", c.Token(), err)
	}
}

func TestWrongAPIURL(t *testing.T) {
	noDaytonaEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/api"
	ln.Close()
	c, err := NewClient(Config{APIKey: testKey, APIURL: dead, RetryBaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.GetSandbox(ctx, "x")
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), "DAYTONA_API_URL") || ctx.Err() != nil {
		t.Fatalf("nothing listening: %v", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("the error shows the key: %v", err)
	}

	// Something that is not Daytona's API.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>hello</html>"))
	}))
	defer other.Close()
	c, err = NewClient(Config{APIKey: testKey, APIURL: other.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(ctx, "x")
	var nd *NotDaytonaError
	if !errors.As(err, &nd) || !strings.Contains(err.Error(), "DAYTONA_API_URL") {
		t.Fatalf("not Daytona: %v", err)
	}
}

func TestErrorsAndConfig(t *testing.T) {
	noDaytonaEnv(t)
	s := newServe(t, nil)
	c := s.client(Config{})
	ctx := context.Background()
	cfg, err := c.GetConfig(ctx)
	if err != nil || cfg.DefaultSnapshot != server.DefaultSnapshot || !strings.HasSuffix(cfg.ProxyToolboxURL, "/toolbox") {
		t.Fatalf("config: %+v, %v", cfg, err)
	}
	_, err = c.GetSandbox(ctx, "nothing-here")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "Not Found" || !strings.Contains(ae.Message, "nothing-here") {
		t.Fatalf("unknown sandbox: %#v", err)
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, ErrConflict) {
		t.Errorf("unknown sandbox: %v does not match ErrNotFound and sandbox.ErrNotFound only", err)
	}
	bad := s.client(Config{APIKey: "wrong"})
	if _, err := bad.GetSandbox(ctx, "x"); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("wrong key: %v, want ErrUnauthorized", err)
	}
	if _, err := c.CreateSandbox(ctx, CreateSandbox{Name: "bad name!"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("bad name: %v, want ErrBadRequest", err)
	}
}

// countOf returns the requests serve counted on route for no sandbox.
func countOf(s *serve, route string) int { return s.srv.RequestCounts("")[route] }

func TestRetries(t *testing.T) {
	noDaytonaEnv(t)
	s := newServe(t, &server.Knobs{Headers: true, CountRequests: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name, fault string
		post        bool // a create (not idempotent), else GET /config
		wantErr     bool
		wantTries   int
	}{
		{"5xx on GET", "502;times=2", false, false, 3},
		{"503 on GET, more than the retries", "503", false, true, 4},
		{"reset on GET", "reset;times=1", false, false, 2},
		{"429 on GET", "429;times=1;retry-after=1", false, false, 2},
		{"500 on POST", "500;times=1", true, true, 1},
		{"reset on POST", "reset;times=1", true, true, 1},
		{"503 on POST", "503;times=1", true, false, 2},
		{"429 on POST", "429;times=2;retry-after=1", true, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.srv.ResetRequestCounts()
			c := s.client(Config{Header: http.Header{server.HeaderTestFault: {tc.fault + ";key=" + t.Name()}}})
			route := "GET /api/config"
			begin := time.Now()
			var err error
			if tc.post {
				route = "POST /api/sandbox"
				// An invalid create: refused after the faults, so that no
				// sandbox is made.
				_, err = c.CreateSandbox(ctx, CreateSandbox{Name: "no such name!"})
				if !tc.wantErr {
					if !errors.Is(err, ErrBadRequest) {
						t.Fatalf("after the faults: %v, want the server's 400", err)
					}
					err = nil
				}
			} else {
				_, err = c.GetConfig(ctx)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if n := countOf(s, route); n != tc.wantTries {
				t.Errorf("%d tries, want %d", n, tc.wantTries)
			}
			if strings.HasPrefix(tc.fault, "429") && time.Since(begin) < time.Duration(tc.wantTries-1)*time.Second {
				t.Errorf("retried a 429 after %v, sooner than its Retry-After", time.Since(begin))
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	dialTimeout := fmt.Errorf("daytona: cannot reach: %w", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}})
	reset := fmt.Errorf("daytona: cannot reach: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
	for _, tc := range []struct {
		name       string
		err        error
		idempotent bool
		want       bool
	}{
		{"429 on a create", &APIError{StatusCode: 429}, false, true},
		{"503 on a create", &APIError{StatusCode: 503}, false, true},
		{"502 on a create", &APIError{StatusCode: 502}, false, false},
		{"502 on a get", &APIError{StatusCode: 502}, true, true},
		{"501 on a get", &APIError{StatusCode: 501}, true, false},
		{"404 on a get", &APIError{StatusCode: 404}, true, false},
		{"reset on a get", reset, true, true},
		{"reset on a create", reset, false, false},
		{"dial timeout on a get", dialTimeout, true, false},
		{"not Daytona", &NotDaytonaError{URL: "u", Err: errors.New("x")}, true, false},
		{"cancelled", context.Canceled, true, false},
	} {
		if got := retryable(tc.err, tc.idempotent); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.name, got, tc.want)
		}
	}
	// Retry-After wins over a shorter backoff, and is capped.
	if d := backoff(0, time.Millisecond, time.Second, &APIError{StatusCode: 429, RetryAfter: 3 * time.Second}); d != 3*time.Second {
		t.Errorf("backoff with Retry-After 3s: %v", d)
	}
	if d := backoff(0, time.Millisecond, time.Second, &APIError{StatusCode: 429, RetryAfter: time.Hour}); d != maxRetryAfter {
		t.Errorf("backoff with Retry-After 1h: %v", d)
	}
	for n := range 10 {
		if d := backoff(n, 100*time.Millisecond, time.Second, errors.New("x")); d < 50*time.Millisecond || d > time.Second {
			t.Errorf("backoff %d: %v outside [50ms, 1s]", n, d)
		}
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestEngineBadConfig: an engine with a wrong API URL or key fails its
// start at once with an error saying what to fix, creating nothing.
func TestEngineBadConfig(t *testing.T) {
	noDaytonaEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/api"
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := New(Options{APIKey: testKey, APIURL: dead})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	if _, err := sb.Start(ctx); err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), "DAYTONA_API_URL") || ctx.Err() != nil {
		t.Fatalf("start with nothing at the API URL: %v", err)
	}
	if _, err := sb.ExecuteCommand(ctx, "true", nil, nil); err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("a command with nothing at the API URL: %v (must fail without showing the key)", err)
	}

	s := newServe(t, nil)
	sb, err = New(Options{Client: s.client(Config{APIKey: "wrong-key"})})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	_, err = sb.Start(ctx)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "DAYTONA_API_KEY") || strings.Contains(err.Error(), "wrong-key") {
		t.Fatalf("start with a wrong key: %v, want ErrUnauthorized naming DAYTONA_API_KEY", err)
	}
	if page, err := s.client(Config{}).ListSandboxes(ctx, ListOptions{}, ""); err != nil || len(page.Items) != 0 {
		t.Fatalf("something was created: %+v, %v", page, err)
	}
}
