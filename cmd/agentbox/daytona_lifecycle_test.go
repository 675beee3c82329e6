package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/daytona/server"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// serveFor starts agentbox serve over e's state dir on loopback, with
// the published images of its store, ended by the test's cleanup, and
// points the daytona engine (DAYTONA_API_URL, DAYTONA_API_KEY) at it.
func serveFor(t *testing.T, e *env, published ...string) {
	t.Helper()
	srv, err := server.New(server.Options{StateDir: e.stateDir, APIKeys: []string{"cli-test-key"}, PublishedImages: published})
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
}

// TestDaytonaHandleForkPause: the daytona engine's handle (what sandbox
// fork, pause and resume call) forks a sandbox of agentbox serve with
// its files, and pauses and resumes it.
func TestDaytonaHandleForkPause(t *testing.T) {
	testenv.NeedRoot(t, "needs root: agentbox serve's sandboxes present as Daytona's user")
	e := newEnv(t)
	serveFor(t, e)
	e.must("--engine", "daytona", "exec", "--id", "src", "--", "sh", "-c", "echo one > /home/daytona/f")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := daytonaEngine{}.Find(ctx, "", "src")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	fork, err := h.(sandbox.Forker).Fork(ctx, sandbox.ForkOptions{ID: "child"})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Cleanup(func() {
		_ = fork.Destroy(context.Background())
	})
	if res, err := fork.ExecuteCommand(ctx, "cat /home/daytona/f", nil, nil); err != nil || strings.TrimSpace(res.Stdout) != "one" {
		t.Fatalf("the fork's file: %+v, %v", res, err)
	}
	p := h.(sandbox.Pauser)
	if err := p.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if info, err := h.Info(ctx); err != nil || info.Status != sandbox.StatusPaused {
		t.Fatalf("info after pause: %+v, %v", info, err)
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if info, err := h.Info(ctx); err != nil || info.Status != sandbox.StatusRunning {
		t.Fatalf("info after resume: %+v, %v", info, err)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(ctx); !errors.Is(err, sandbox.ErrInvalidState) {
		t.Fatalf("pause of a stopped sandbox: %v, want ErrInvalidState", err)
	}
}

// TestDaytonaSandboxForkPauseCommands: `agentbox --engine daytona sandbox
// fork|pause|resume` against agentbox serve: the fork has the source's
// file and its own afterwards, pause shows in `sandbox info` and resume
// takes it away, and pause of a stopped sandbox fails saying so.
func TestDaytonaSandboxForkPauseCommands(t *testing.T) {
	testenv.NeedRoot(t, "needs root: agentbox serve's sandboxes present as Daytona's user")
	e := newEnv(t)
	serveFor(t, e)
	d := func(args ...string) result { return e.must(append([]string{"--engine", "daytona"}, args...)...) }
	d("exec", "--id", "clisrc", "--", "sh", "-c", "echo one > /home/daytona/f")
	t.Cleanup(func() { e.run("", "--engine", "daytona", "sandbox", "rm", "clisrc", "clichild") })
	d("sandbox", "fork", "clisrc", "clichild")
	if got := strings.TrimSpace(d("exec", "--id", "clichild", "--", "sh", "-c", "cat /home/daytona/f; echo two > /home/daytona/f").stdout); got != "one" {
		t.Fatalf("the fork's file: %q, want %q", got, "one")
	}
	if got := strings.TrimSpace(d("exec", "--id", "clisrc", "--", "cat", "/home/daytona/f").stdout); got != "one" {
		t.Fatalf("the source's file after the fork wrote its own: %q, want %q", got, "one")
	}
	d("sandbox", "pause", "clisrc")
	if out := d("sandbox", "info", "clisrc").stdout; !strings.Contains(out, "paused") {
		t.Fatalf("sandbox info after pause says no paused:\n%s", out)
	}
	d("sandbox", "resume", "clisrc")
	if out := d("sandbox", "info", "clisrc").stdout; strings.Contains(out, "paused") {
		t.Fatalf("sandbox info after resume still says paused:\n%s", out)
	}
	d("sandbox", "stop", "clisrc")
	r := e.run("", "--engine", "daytona", "sandbox", "pause", "clisrc")
	if r.code == 0 || !strings.Contains(r.stderr, "not") {
		t.Fatalf("pause of a stopped sandbox: exit %d, stderr %q; want a failure saying why", r.code, r.stderr)
	}
	t.Logf("pause of a stopped sandbox: %s", r.stderr)
}
