package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestDaytonaEngine: with --engine daytona the commands drive the
// sandboxes of a Daytona control plane, configured by DAYTONA_API_URL and
// DAYTONA_API_KEY: here agentbox serve's, on loopback, over local
// sandboxes of the test's state dir. exec creates the sandbox (named by
// --id) and runs in it as Daytona's user; spawn, ps, logs and kill reach
// its background processes; sandbox ls, info, stop and rm manage it.
func TestDaytonaEngine(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("AGENTBOX_REQUIRE_ALL") == "1" {
			t.Fatal("needs root (AGENTBOX_REQUIRE_ALL=1): agentbox serve's sandboxes present as Daytona's user")
		}
		t.Skip("needs root: agentbox serve's sandboxes present as Daytona's user")
	}
	e := newEnv(t)
	srv, err := server.New(server.Options{StateDir: e.stateDir, APIKeys: []string{"cli-test-key"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close serve: %v", err)
		}
	})
	t.Setenv("DAYTONA_API_URL", ts.URL+"/api")
	t.Setenv("DAYTONA_API_KEY", "cli-test-key")
	dt := func(args ...string) result {
		t.Helper()
		return e.must(append([]string{"--engine", "daytona"}, args...)...)
	}

	if r := dt("exec", "--id", "dt", "--", "sh", "-c", `echo "hi from $(id -un)"`); r.stdout != "hi from daytona\n" {
		t.Fatalf("exec: %q, want hi from daytona", r.stdout)
	}
	var infos []sandbox.Info
	if err := json.Unmarshal([]byte(dt("sandbox", "ls", "--json").stdout), &infos); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != "dt" || infos[0].Provider != "daytona" || infos[0].Status != sandbox.StatusRunning {
		t.Fatalf("sandbox ls: %+v, want dt, daytona, running", infos)
	}

	dt("spawn", "--id", "dt", "--", "sh", "-c", "echo started; sleep 600")
	if r := dt("ps", "--id", "dt"); !strings.Contains(r.stdout, "sleep 600") {
		t.Errorf("ps does not list the background process: %q", r.stdout)
	}
	if r := dt("logs", "--id", "dt", "1"); r.stdout != "started\n" {
		t.Errorf("logs: %q, want started", r.stdout)
	}
	dt("kill", "--id", "dt", "1")

	dt("sandbox", "stop", "dt")
	var info sandbox.Info
	if err := json.Unmarshal([]byte(dt("sandbox", "info", "dt", "--json").stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Status != sandbox.StatusStopped {
		t.Errorf("sandbox info after stop: %s, want stopped", info.Status)
	}
	dt("sandbox", "rm", "dt")
	if r := dt("sandbox", "ls", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("sandbox ls after rm: %q, want none", r.stdout)
	}
	if r := e.run("", "--engine", "daytona", "ports", "publish", "dt", "8080"); r.code == 0 || !strings.Contains(r.stderr, "preview URLs") {
		t.Errorf("ports publish on daytona: %+v, want a refusal naming preview URLs", r)
	}
}
