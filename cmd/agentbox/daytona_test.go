package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/cmd/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/testrootfs"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestDaytonaEngine: with --engine daytona the commands drive the
// sandboxes of a Daytona control plane, configured by DAYTONA_API_URL and
// DAYTONA_API_KEY: here agentbox serve's, on loopback, over local
// sandboxes of the test's state dir. exec creates the sandbox (named by
// --id) and runs in it as Daytona's user; spawn, ps, logs and kill reach
// its background processes; sandbox ls, info, stop and rm manage it.
func TestDaytonaEngine(t *testing.T) {
	testenv.NeedRoot(t, "needs root: agentbox serve's sandboxes present as Daytona's user")
	e := newEnv(t)
	serveFor(t, e)
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

// TestDaytonaSnapshotCLI: agentbox snapshot create on the daytona engine
// builds an image on the control plane (here agentbox serve's local image
// builder) with its build logs on stderr; exec --snapshot makes a sandbox
// of it; ls and rm manage it; a failing build exits non-zero with the
// builder's reason; --from (a sandbox's root) is refused.
func TestDaytonaSnapshotCLI(t *testing.T) {
	testenv.NeedRoot(t, "needs root: agentbox serve builds images in local sandboxes")
	e := newEnv(t)
	st, err := local.OpenImageStore(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	testrootfs.SaveImage(t, st, "team/base:1")
	serveFor(t, e, "team/base:1")
	dt := func(args ...string) result {
		t.Helper()
		return e.must(append([]string{"--engine", "daytona"}, args...)...)
	}

	r := dt("snapshot", "create", "tools:1", "--from-image", "team/base:1", "--run", "echo built > /built", "--run", "echo step-two-output")
	if !strings.HasPrefix(r.stdout, "tools:1 ") || !strings.Contains(r.stderr, "step-two-output") || !strings.Contains(r.stderr, "FROM team/base:1") {
		t.Fatalf("snapshot create: stdout %q, stderr %q: want the name and id, and the build logs", r.stdout, r.stderr)
	}
	if r := dt("exec", "--id", "snap-user", "--snapshot", "tools:1", "--", "cat", "/built"); r.stdout != "built\n" {
		t.Errorf("a sandbox of the snapshot: %q", r.stdout)
	}
	dt("sandbox", "rm", "snap-user")

	dockerfile := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(dockerfile, []byte("FROM team/base:1\nRUN echo about-to-fail && exit 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := e.run("", "--engine", "daytona", "snapshot", "create", "broken", "--dockerfile", dockerfile)
	if fail.code == 0 || !strings.Contains(fail.stderr, "about-to-fail") || !strings.Contains(fail.stderr, "build_failed") {
		t.Errorf("a failing build: %+v, want non-zero with its logs and state", fail)
	}

	var snaps []cli.Snapshot
	if err := json.Unmarshal([]byte(dt("snapshot", "ls", "--json").stdout), &snaps); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range snaps {
		states[s.Name] = s.State
	}
	if states["tools:1"] != "active" || states["broken"] != "build_failed" {
		t.Errorf("snapshot ls: %+v", snaps)
	}
	dt("snapshot", "rm", "tools:1", "broken")
	if r := e.run("", "--engine", "daytona", "snapshot", "rm", "tools:1"); r.code != 1 || !strings.Contains(r.stderr, `no snapshot "tools:1"`) {
		t.Errorf("rm of a removed snapshot: %+v", r)
	}
	for _, bad := range [][]string{
		{"snapshot", "create", "x"},
		{"snapshot", "create", "x", "--image", "a", "--from-image", "b"},
		{"snapshot", "create", "x", "--image", "a", "--run", "true"},
	} {
		if r := e.run("", append([]string{"--engine", "daytona"}, bad...)...); r.code != 2 {
			t.Errorf("%v: %+v, want a usage error", bad, r)
		}
	}
	if r := e.run("", "--engine", "daytona", "snapshot", "create", "x", "--from", "dt"); r.code == 0 || !strings.Contains(r.stderr, "--from-image") {
		t.Errorf("--from on daytona: %+v, want a refusal naming the other sources", r)
	}
}

// TestDaytonaEngineBadConfig: --engine daytona without an API key, or
// with an API URL where nothing listens, fails at once saying what to
// set, without showing the key.
func TestDaytonaEngineBadConfig(t *testing.T) {
	e := newEnv(t)
	t.Chdir(t.TempDir()) // no .env file
	for _, k := range []string{"DAYTONA_API_KEY", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID", "DAYTONA_API_URL", "DAYTONA_TARGET", "DAYTONA_SERVER_URL"} {
		t.Setenv(k, "")
	}
	if r := e.run("", "--engine", "daytona", "sandbox", "ls"); r.code != 1 || !strings.Contains(r.stderr, "DAYTONA_API_KEY") {
		t.Errorf("no key: %+v, want exit 1 naming DAYTONA_API_KEY", r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/api"
	ln.Close()
	t.Setenv("DAYTONA_API_URL", dead)
	t.Setenv("DAYTONA_API_KEY", "secret-cli-key")
	for _, args := range [][]string{{"sandbox", "ls"}, {"exec", "--id", "x", "--", "true"}, {"snapshot", "ls"}} {
		r := e.run("", append([]string{"--engine", "daytona"}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "cannot reach") || !strings.Contains(r.stderr, "DAYTONA_API_URL") || strings.Contains(r.stderr, "secret-cli-key") {
			t.Errorf("%v with nothing at the API URL: %+v", args, r)
		}
	}
}
