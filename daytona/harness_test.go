package daytona

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/localtest"
	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/local"
)

func TestMain(m *testing.M) {
	local.Init() // the test binary is re-executed as local sandboxes' init
	// fake-gcs-server's dependencies start opencensus's worker at init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// testKey is the API key of the test servers.
const testKey = "dtn_daytona-client-test-key"

// serve is agentbox serve (package daytona/server over the local engine:
// real sandboxes) on loopback, every exchange checked against the spec
// files on the server's side.
type serve struct {
	t   *testing.T
	dir string // the local engine's state dir
	srv *server.Server
	url string // the API URL: …/api
	cp  *spectest.Validator
}

// newServe starts a server with knobs, ended (and its sandboxes checked
// gone) by the test's cleanup.
func newServe(t *testing.T, knobs *server.Knobs) *serve {
	t.Helper()
	cp := spectest.LoadControlPlane(t).WithBasePath("/api") // first: it may skip the test
	tb := spectest.Load(t).ResponsesOnly()
	dir := t.TempDir()
	t.Cleanup(func() { localtest.CheckNoneLeft(t, dir) })
	// team/base:1, which tests save in the store, is published to tenants.
	srv, err := server.New(server.Options{StateDir: dir, APIKeys: []string{testKey}, Knobs: knobs, PublishedImages: []string{"team/base:1"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(spectest.ServerHandler(t, cp, tb, srv))
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return &serve{t: t, dir: dir, srv: srv, url: hs.URL + "/api", cp: cp}
}

// client returns a Client of s configured by cfg (its URL and key filled
// in), whose every exchange is checked against the spec files on the
// client's side too, with short retry pauses.
func (s *serve) client(cfg Config) *Client {
	s.t.Helper()
	if cfg.APIURL == "" {
		cfg.APIURL = s.url
	}
	if cfg.APIKey == "" && cfg.JWTToken == "" {
		cfg.APIKey = testKey
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = 5 * time.Millisecond
	}
	tr := &http.Transport{}
	s.t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: s.cp.Transport(s.t, tr)}
	c, err := NewClient(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// needRoot needs the test to run as root (see testenv.NeedRoot): the local
// engine's default network needs it.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "needs root: agentbox serve's sandboxes use the local engine's default network and limits")
}

// noDaytonaEnv clears the Daytona variables of the environment and moves
// to an empty folder (no .env file) for the test.
func noDaytonaEnv(t *testing.T) {
	t.Helper()
	// The spec files are found from the working directory: pin them. A
	// test that needs missing ones skips when it loads them (spectest.Load).
	if dir, err := spectest.SpecDir(); err == nil {
		t.Setenv(spectest.EnvSpecDir, dir)
	}
	for _, k := range []string{EnvAPIKey, EnvJWTToken, EnvOrganizationID, EnvAPIURL, EnvTarget, envServerURL} {
		t.Setenv(k, "")
	}
	t.Chdir(t.TempDir())
}
