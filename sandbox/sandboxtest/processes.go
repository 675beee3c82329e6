package sandboxtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// procSuite is what the Processes checks share: one sandbox and its
// process manager.
type procSuite struct {
	*suite
	sb sandbox.Sandbox
	pm sandbox.ProcessManager
}

// checks lists the Processes checks in the order they run.
func (s *procSuite) checks() []check {
	return []check{
		{"SpawnWait", s.testSpawnWait},
		{"UniquePIDs", s.testUniquePIDs},
		{"OutputWhileRunning", s.testOutputWhileRunning},
		{"Kill", s.testKill},
		{"Timeout", s.testTimeout},
		{"SendStdin", s.testSendStdin},
		{"CloseStdin", s.testCloseStdin},
		{"SpawnStdinReader", s.testSpawnStdinReader},
		{"SpawnCwdEnv", s.testSpawnCwdEnv},
		{"Reattach", s.testReattach},
		{"ListGetKill", s.testListGetKill},
	}
}

// testProcesses runs every Processes check against one sandbox.
func (s *suite) testProcesses(t *testing.T) {
	sb := s.newSandbox(t)
	pm := sb.Processes()
	if pm == nil {
		t.Fatal("Processes() returned nil")
	}
	p := &procSuite{suite: s, sb: sb, pm: pm}
	runChecks(t, p.checks())
}

// testSpawnWait checks a background process's command, output and exit code.
func (s *procSuite) testSpawnWait(t *testing.T) {
	pm := s.pm
	p := s.spawn(t, pm, "echo out; echo err >&2; exit 42", nil)
	if p.Command() != "echo out; echo err >&2; exit 42" {
		t.Fatalf("Command() = %q", p.Command())
	}
	r := s.wait(t, p)
	if r.ExitCode != 42 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.Killed || r.TimedOut {
		t.Fatalf("result %+v; want exit 42, out/err, not killed", r)
	}
	if code, ok := p.ExitCode(); !ok || code != 42 {
		t.Fatalf("ExitCode() = %d, %v; want 42, true", code, ok)
	}
	if p.Stdout() != "out\n" || p.Stderr() != "err\n" {
		t.Fatalf("Stdout() %q Stderr() %q", p.Stdout(), p.Stderr())
	}
	// Wait is idempotent and safe from many goroutines.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			r2, err := p.Wait(s.context(t))
			if err != nil || r2.ExitCode != 42 || r2.Stdout != "out\n" {
				t.Errorf("repeated Wait: %+v, %v", r2, err)
			}
		})
	}
	wg.Wait()
}

// testUniquePIDs checks that process ids do not repeat.
func (s *procSuite) testUniquePIDs(t *testing.T) {
	pm := s.pm
	var pids []string
	for range 4 {
		pids = append(pids, s.spawn(t, pm, "true", nil).PID())
	}
	if !sortedUnique(pids) {
		t.Fatalf("PIDs repeat: %q", pids)
	}
}

// testOutputWhileRunning checks that output is readable and streamed while the process runs.
func (s *procSuite) testOutputWhileRunning(t *testing.T) {
	pm := s.pm
	stdout, stderr := newStreamWriter(), newStreamWriter()
	p := s.spawn(t, pm, "echo a; echo b >&2; exec sleep 30", &sandbox.ExecOptions{Stdout: stdout, Stderr: stderr})
	waitOutput(t, p, "a\n", "b\n")
	for _, w := range []*streamWriter{stdout, stderr} {
		select {
		case <-w.first:
		case <-time.After(10 * time.Second):
			t.Fatal("Spawn's Stdout/Stderr writers got nothing while the process runs")
		}
	}
	if _, exited := p.ExitCode(); exited {
		t.Fatal("ExitCode reports exited for a running process")
	}
	// Waiting with a short context returns without killing it.
	wctx, cancel := context.WithTimeout(s.context(t), 100*time.Millisecond)
	_, err := p.Wait(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with an expiring context: err = %v, want DeadlineExceeded", err)
	}
	if _, exited := p.ExitCode(); exited {
		t.Fatal("a cancelled Wait killed the process")
	}
	if stdout.String() != "a\n" || stderr.String() != "b\n" {
		t.Fatalf("streamed %q / %q", stdout.String(), stderr.String())
	}
}

// testKill checks that Kill ends the whole process tree and reports 137.
func (s *procSuite) testKill(t *testing.T) {
	sb, pm := s.sb, s.pm
	ctx := s.context(t)
	dir := s.scratch(t, sb)
	tree, pidFiles := treeScript(dir + "/kill")
	p := s.spawn(t, pm, tree+"wait", nil)
	for _, f := range pidFiles {
		waitPIDFile(ctx, t, sb, f)
	}
	killed, err := p.Kill(ctx)
	if err != nil || !killed {
		t.Fatalf("Kill of a running process = %v, %v; want true, nil", killed, err)
	}
	r := s.wait(t, p)
	if r.ExitCode != sandbox.ExitKilled || !r.Killed || r.TimedOut || r.Success() {
		t.Fatalf("killed process: exit %d Killed %v TimedOut %v; want 137 true false", r.ExitCode, r.Killed, r.TimedOut)
	}
	if code, ok := p.ExitCode(); !ok || code != sandbox.ExitKilled {
		t.Fatalf("ExitCode() after Kill = %d, %v", code, ok)
	}
	if killed, err := p.Kill(ctx); err != nil || killed {
		t.Fatalf("second Kill = %v, %v; want false, nil", killed, err)
	}
	// The killed process can be fetched once more, then it is forgotten.
	got, err := pm.Get(ctx, p.PID())
	if err != nil {
		t.Fatalf("Get after Kill: %v", err)
	}
	if code, ok := got.ExitCode(); !ok || code != sandbox.ExitKilled {
		t.Fatalf("Get after Kill: ExitCode %d, %v; want 137, true", code, ok)
	}
	if _, err := pm.Get(ctx, p.PID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("second Get after Kill: err = %v, want ErrNotFound", err)
	}
	assertAllGone(ctx, t, sb, pidFiles)
}

// testTimeout checks that a process's timeout kills its whole tree and reports 124.
func (s *procSuite) testTimeout(t *testing.T) {
	sb, pm := s.sb, s.pm
	ctx := s.context(t)
	dir := s.scratch(t, sb)
	tree, pidFiles := treeScript(dir + "/spawn-timeout")
	p := s.spawn(t, pm, tree+"wait", &sandbox.ExecOptions{Timeout: time.Second})
	r := s.wait(t, p)
	if r.ExitCode != sandbox.ExitTimedOut || !r.TimedOut || !r.Killed {
		t.Fatalf("timed-out process: exit %d TimedOut %v Killed %v; want 124 true true", r.ExitCode, r.TimedOut, r.Killed)
	}
	assertAllGone(ctx, t, sb, pidFiles)
}

// testSendStdin checks that SendStdin reaches the process.
func (s *procSuite) testSendStdin(t *testing.T) {
	pm := s.pm
	ctx := s.context(t)
	p := s.spawn(t, pm, "head -1", nil)
	if err := p.SendStdin(ctx, []byte("first line\n")); err != nil {
		t.Fatalf("SendStdin: %v", err)
	}
	r := s.wait(t, p)
	if r.ExitCode != 0 || r.Stdout != "first line\n" {
		t.Fatalf("head -1 after SendStdin: exit %d stdout %q", r.ExitCode, r.Stdout)
	}
	err := p.SendStdin(ctx, []byte("too late\n"))
	if !errors.Is(err, sandbox.ErrExited) {
		t.Fatalf("SendStdin after exit: err = %v, want ErrExited", err)
	}
}

// testCloseStdin checks exact stdin bytes and that CloseStdin gives the process EOF.
func (s *procSuite) testCloseStdin(t *testing.T) {
	pm := s.pm
	ctx := s.context(t)
	p := s.spawn(t, pm, "cat; echo eof", nil)
	if err := p.SendStdin(ctx, []byte("no newline")); err != nil {
		t.Fatalf("SendStdin: %v", err)
	}
	if err := p.SendStdin(ctx, []byte(" ✓ \x00")); err != nil {
		t.Fatalf("SendStdin: %v", err)
	}
	if !s.closeStdin(ctx, t, p) {
		return
	}
	r := s.wait(t, p)
	if want := "no newline ✓ \x00eof\n"; r.ExitCode != 0 || r.Stdout != want {
		t.Fatalf("cat after CloseStdin: exit %d stdout %q, want %q", r.ExitCode, r.Stdout, want)
	}
}

// testSpawnStdinReader checks that ExecOptions.Stdin feeds a background process.
func (s *procSuite) testSpawnStdinReader(t *testing.T) {
	pm := s.pm
	if s.opts.NoStdinReader {
		_, err := pm.Spawn(s.context(t), "cat", &sandbox.ExecOptions{Stdin: strings.NewReader("from a reader\n")})
		if !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("Spawn with Stdin on an engine without it: err = %v, want ErrUnsupported", err)
		}
		return
	}
	p := s.spawn(t, pm, "cat", &sandbox.ExecOptions{Stdin: strings.NewReader("from a reader\n")})
	r := s.wait(t, p)
	if r.ExitCode != 0 || r.Stdout != "from a reader\n" {
		t.Fatalf("cat with Stdin reader: exit %d stdout %q", r.ExitCode, r.Stdout)
	}
}

// testSpawnCwdEnv checks Cwd and Env of a background process, and the error for a bad name.
func (s *procSuite) testSpawnCwdEnv(t *testing.T) {
	sb, pm := s.sb, s.pm
	dir := s.scratch(t, sb)
	p := s.spawn(t, pm, `printf '%s|' "$SBT_SPAWN"; pwd`, &sandbox.ExecOptions{Cwd: dir, Env: map[string]string{"SBT_SPAWN": "it's set"}})
	r := s.wait(t, p)
	if want := "it's set|" + dir + "\n"; r.Stdout != want {
		t.Fatalf("spawn with Cwd and Env: %q, want %q", r.Stdout, want)
	}
	_, err := pm.Spawn(s.context(t), "true", &sandbox.ExecOptions{Env: map[string]string{"1BAD": "x"}})
	if !errors.Is(err, sandbox.ErrInvalidEnv) {
		t.Fatalf("Spawn with an invalid env name: err = %v, want ErrInvalidEnv", err)
	}
}

// testReattach checks that the background processes of a sandbox belong to
// it, not to a handle: what one handle spawns, another one (Options.Reopen)
// lists, reads, feeds, waits for and kills.
func (s *procSuite) testReattach(t *testing.T) {
	if s.opts.Reopen == nil {
		t.Skip("Options.Reopen is not set: the engine's test gives no second handle on a sandbox")
	}
	r := &reattachSuite{suite: s.suite, sb: s.sb, a: s.pm, b: s.reopen(t, s.sb).Processes()}
	runChecks(t, r.checks())
}

// testListGetKill checks List, Get and Kill of running and exited processes, and the forgetting rule.
func (s *procSuite) testListGetKill(t *testing.T) {
	pm := s.pm
	ctx := s.context(t)
	running := s.spawn(t, pm, "sleep 30", nil)
	exited := s.spawn(t, pm, "exit 7", nil)
	s.wait(t, exited)

	list, err := pm.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	find := func(pid string) *sandbox.ProcessInfo {
		i := slices.IndexFunc(list, func(pi sandbox.ProcessInfo) bool { return pi.PID == pid })
		if i < 0 {
			return nil
		}
		return &list[i]
	}
	if pi := find(running.PID()); pi == nil || !pi.Running || pi.ExitCode != nil || !strings.Contains(pi.Command, "sleep") {
		t.Fatalf("List entry of the running process: %+v (list %+v)", pi, list)
	}
	if pi := find(exited.PID()); pi == nil || pi.Running || pi.ExitCode == nil || *pi.ExitCode != 7 {
		t.Fatalf("List entry of the exited process: %+v (list %+v)", pi, list)
	}

	got, err := pm.Get(ctx, running.PID())
	if err != nil || got.PID() != running.PID() {
		t.Fatalf("Get(running) = %v, %v", got, err)
	}
	// An exited process can be fetched once more, then it is forgotten.
	got, err = pm.Get(ctx, exited.PID())
	if err != nil || got.PID() != exited.PID() {
		t.Fatalf("Get(exited) first time = %v, %v", got, err)
	}
	if code, ok := got.ExitCode(); !ok || code != 7 {
		t.Fatalf("fetched exited process: ExitCode %d, %v", code, ok)
	}
	if _, err := pm.Get(ctx, exited.PID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Get(exited) second time: err = %v, want ErrNotFound", err)
	}
	if _, err := pm.Get(ctx, "no-such-process"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Get(unknown): err = %v, want ErrNotFound", err)
	}
	if killed, err := pm.Kill(ctx, "no-such-process"); err != nil || killed {
		t.Fatalf("Kill(unknown) = %v, %v; want false, nil", killed, err)
	}

	killed, err := pm.Kill(ctx, running.PID())
	if err != nil || !killed {
		t.Fatalf("manager Kill(running) = %v, %v; want true, nil", killed, err)
	}
	if code, ok := running.ExitCode(); !ok || code != sandbox.ExitKilled {
		t.Fatalf("after manager Kill: ExitCode %d, %v; want 137, true", code, ok)
	}
	if killed, err := pm.Kill(ctx, running.PID()); err != nil || killed {
		t.Fatalf("manager Kill of a killed process = %v, %v; want false, nil", killed, err)
	}
	list, err = pm.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if pi := find(running.PID()); pi != nil && pi.Running {
		t.Fatalf("killed process listed as running: %+v", pi)
	}
}
