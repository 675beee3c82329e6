package daytona

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// run runs command in sb and returns its stdout, failing unless it exits 0.
func run(t *testing.T, sb sandbox.Sandbox, command string) string {
	t.Helper()
	res, err := sb.ExecuteCommand(context.Background(), command, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %+v, %v", command, res, err)
	}
	return strings.TrimSpace(res.Stdout)
}

// TestForkOverServe forks a started sandbox of agentbox serve: the fork
// is started, has the source's files, its own labels, diverges, and is
// listed among the source's forks.
func TestForkOverServe(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := newEngine(t, s, Config{}, Options{ID: "src", Labels: map[string]string{"team": "a"}})
	run(t, src, "echo one > /home/daytona/f")
	got, err := src.Fork(ctx, sandbox.ForkOptions{ID: "child"})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	child := got.(*Sandbox)
	t.Cleanup(func() {
		_ = child.Destroy(context.Background())
		child.Close(context.Background())
	})
	if st := child.Status(); st != sandbox.StatusRunning {
		t.Fatalf("fork's status %q, want running", st)
	}
	if out := run(t, child, "cat /home/daytona/f"); out != "one" {
		t.Fatalf("fork's file: %q", out)
	}
	run(t, child, "echo two > /home/daytona/g")
	if out := run(t, src, "test -e /home/daytona/g || echo no-g"); out != "no-g" {
		t.Fatalf("source sees the fork's file: %q", out)
	}
	remote, err := src.API().GetSandbox(ctx, "child")
	if err != nil || remote.Labels[LabelSandboxID] != "child" || remote.Labels["team"] != "a" {
		t.Fatalf("the fork: %+v, %v", remote, err)
	}
	forks, err := src.API().ListForks(ctx, src.RemoteID())
	if err != nil || len(forks) != 1 || forks[0].Name != "child" {
		t.Fatalf("forks: %+v, %v", forks, err)
	}
}

// TestLifecycleNotStarted: fork, pause, resume and snapshot of a sandbox
// never started fail with sandbox.ErrNotReady, sending nothing.
func TestLifecycleNotStarted(t *testing.T) {
	noDaytonaEnv(t)
	sb, err := New(Options{ID: "never", APIURL: "http://127.0.0.1:1/api", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx := context.Background()
	_, ferr := sb.Fork(ctx, sandbox.ForkOptions{})
	for what, err := range map[string]error{
		"fork": ferr, "pause": sb.Pause(ctx), "resume": sb.Resume(ctx), "snapshot": sb.CreateSnapshot(ctx, "x"),
	} {
		if !errors.Is(err, sandbox.ErrNotReady) {
			t.Errorf("%s: %v, want ErrNotReady", what, err)
		}
	}
}

// TestPauseOverServe pauses a started sandbox of agentbox serve: the
// server and the handle say paused, and Resume makes it run again.
func TestPauseOverServe(t *testing.T) {
	needRoot(t)
	noDaytonaEnv(t)
	s := newServe(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := newEngine(t, s, Config{}, Options{ID: "pausing"})
	run(t, sb, "true")
	if err := sb.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if got, err := sb.API().GetSandbox(ctx, "pausing"); err != nil || got.State != StatePaused || sb.Status() != sandbox.StatusPaused {
		t.Fatalf("after pause: %+v, %v; status %q", got, err, sb.Status())
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got, err := sb.API().GetSandbox(ctx, "pausing"); err != nil || got.State != StateStarted || sb.Status() != sandbox.StatusRunning {
		t.Fatalf("after resume: %+v, %v; status %q", got, err, sb.Status())
	}
	if out := run(t, sb, "echo back"); out != "back" {
		t.Fatalf("after resume: %q", out)
	}
}
