package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// testPause runs the checks of sandbox.Pauser, for sandboxes that
// implement it: a pause keeps a running process's memory, a command
// resumes a paused sandbox, and a stopped one cannot be paused.
func (s *suite) testPause(t *testing.T) {
	if _, ok := s.newSandbox(t).(sandbox.Pauser); !ok {
		t.Log("the sandbox does not implement sandbox.Pauser: nothing to check")
		return
	}
	runChecks(t, []check{
		{"KeepsMemory", s.testPauseKeepsMemory},
		{"CommandResumes", s.testPauseCommandResumes},
		{"Idempotent", s.testPauseIdempotent},
		{"Stopped", s.testPauseStopped},
	})
}

// pausedSandbox returns a running sandbox that implements sandbox.Pauser,
// destroyed when t ends.
func (s *suite) pausedSandbox(t *testing.T) (sandbox.Sandbox, sandbox.Pauser) {
	t.Helper()
	sb := s.newSandbox(t)
	if _, err := sb.Start(s.context(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return sb, sb.(sandbox.Pauser)
}

// pause pauses sb, skipping t when the engine cannot here (the local
// engine without root), and checks that Info reports it paused.
func (s *suite) pause(t *testing.T, sb sandbox.Sandbox, p sandbox.Pauser) {
	t.Helper()
	ctx := s.context(t)
	err := p.Pause(ctx)
	if errors.Is(err, sandbox.ErrUnsupported) {
		testenv.Skipf(t, "the sandbox cannot pause here: %v", err)
	}
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatalf("Info of a paused sandbox: %v", err)
	}
	if info.Status != sandbox.StatusPaused {
		t.Fatalf("Info().Status of a paused sandbox = %q, want %q", info.Status, sandbox.StatusPaused)
	}
}

// counterLine is one line of the counter process: its token (drawn once,
// kept in its memory) and its count.
type counterLine struct {
	token string
	n     int
}

// counterLines parses the counter process's output, up to its last whole
// line.
func counterLines(out string) ([]counterLine, error) {
	var lines []counterLine
	whole := out[:strings.LastIndex(out, "\n")+1]
	for _, l := range strings.Split(strings.TrimSuffix(whole, "\n"), "\n") {
		if l == "" {
			continue
		}
		tok, num, ok := strings.Cut(l, " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("counter line %q is not \"TOKEN N\"", l)
		}
		lines = append(lines, counterLine{tok, n})
	}
	return lines, nil
}

// waitCount waits until the counter process p has printed more than n
// lines, and returns them.
func waitCount(t *testing.T, p sandbox.Process, n int) []counterLine {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lines, err := counterLines(p.Stdout())
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) > n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter printed %d lines, want more than %d (stdout %q, stderr %q)", len(lines), n, p.Stdout(), p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testPauseKeepsMemory: a shell keeps a token and a counter in memory and
// prints both every few milliseconds; after a pause and a resume it goes
// on counting from where it was, with the same token: the same process,
// its memory kept.
func (s *suite) testPauseKeepsMemory(t *testing.T) {
	sb, pz := s.pausedSandbox(t)
	ctx := s.context(t)
	proc, err := sb.Processes().Spawn(ctx, `tok=$$-$(date +%s%N); i=0; while :; do i=$((i+1)); echo "$tok $i"; sleep 0.02; done`, nil)
	if err != nil {
		t.Fatalf("Spawn the counter: %v", err)
	}
	t.Cleanup(func() { _, _ = proc.Kill(context.Background()) })
	before := waitCount(t, proc, 3)
	s.pause(t, sb, pz)
	if err := pz.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusRunning {
		t.Fatalf("Info after Resume: %+v, %v; want status running", info, err)
	}
	lines := waitCount(t, proc, len(before)+5)
	for i, l := range lines {
		if l.token != lines[0].token || l.n != i+1 {
			t.Fatalf("line %d of the counter is %q %d, want %q %d: the process did not go on from where it was (stdout %q)",
				i+1, l.token, l.n, lines[0].token, i+1, proc.Stdout())
		}
	}
}

// testPauseCommandResumes: a command run on a paused sandbox resumes it
// and runs.
func (s *suite) testPauseCommandResumes(t *testing.T) {
	sb, pz := s.pausedSandbox(t)
	ctx := s.context(t)
	s.pause(t, sb, pz)
	r := mustRun(ctx, t, sb, "echo", []string{"resumed"}, nil)
	if r.ExitCode != 0 || r.Stdout != s.out("resumed\n") {
		t.Fatalf("command on a paused sandbox: exit %d, stdout %q", r.ExitCode, r.Stdout)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusRunning {
		t.Fatalf("Info after a command resumed it: %+v, %v; want status running", info, err)
	}
}

// testPauseIdempotent: Pause of a paused sandbox succeeds and leaves it
// paused; Resume of a running one succeeds and leaves it running.
func (s *suite) testPauseIdempotent(t *testing.T) {
	sb, pz := s.pausedSandbox(t)
	ctx := s.context(t)
	if err := pz.Resume(ctx); err != nil {
		t.Fatalf("Resume of a running sandbox: %v", err)
	}
	s.pause(t, sb, pz)
	s.pause(t, sb, pz)
}

// testPauseStopped: Pause of a stopped sandbox fails with
// sandbox.ErrInvalidState and leaves it stopped.
func (s *suite) testPauseStopped(t *testing.T) {
	sb, pz := s.pausedSandbox(t)
	ctx := s.context(t)
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := pz.Pause(ctx); !errors.Is(err, sandbox.ErrInvalidState) {
		t.Fatalf("Pause of a stopped sandbox = %v, want an error matching sandbox.ErrInvalidState", err)
	}
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Info after a refused Pause: %+v, %v; want status stopped", info, err)
	}
}
