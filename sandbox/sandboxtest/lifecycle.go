package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// lifecycleChecks lists the Lifecycle checks; each makes the sandboxes it needs, in the order they run.
func (s *suite) lifecycleChecks() []check {
	return []check{
		{"Identity", s.testIdentity},
		{"Transitions", s.testTransitions},
		{"DestroyPending", s.testDestroyPending},
		{"ConcurrentStart", s.testConcurrentStart},
		{"ConcurrentStopStart", s.testConcurrentStopStart},
		{"FirstCommandStarts", s.testFirstCommandStarts},
		{"StopStartCycles", s.testStopStartCycles},
		{"ProcessesStart", s.testProcessesStart},
		{"StopEndsProcesses", s.testStopEndsProcesses},
		{"PersistentFiles", s.testPersistentFiles},
	}
}

// testLifecycle runs every Lifecycle check.
func (s *suite) testLifecycle(t *testing.T) { runChecks(t, s.lifecycleChecks()) }

// testIdentity checks that ID, Name and Provider are set and ids are unique.
func (s *suite) testIdentity(t *testing.T) {
	a, b := s.newSandbox(t), s.newSandbox(t)
	for _, sb := range []sandbox.Sandbox{a, b} {
		if sb.ID() == "" || sb.Name() == "" || sb.Provider() == "" {
			t.Fatalf("ID %q, Name %q, Provider %q: none may be empty", sb.ID(), sb.Name(), sb.Provider())
		}
	}
	if a.ID() == b.ID() {
		t.Fatalf("two sandboxes share the id %q", a.ID())
	}
	if a.Name() != b.Name() || a.Provider() != b.Provider() {
		t.Fatalf("same engine, different names: %q/%q and %q/%q", a.Name(), a.Provider(), b.Name(), b.Provider())
	}
	if strings.TrimSpace(a.Instructions()) == "" {
		t.Fatal("Instructions is empty")
	}
}

// testTransitions checks the status through Start, Stop, Start and Destroy, with their outcomes.
func (s *suite) testTransitions(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	want := func(st sandbox.Status) {
		t.Helper()
		if got := sb.Status(); got != st {
			t.Fatalf("status = %q, want %q", got, st)
		}
	}
	want(sandbox.StatusPending)
	out, err := sb.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if out != sandbox.OutcomeCreated {
		t.Fatalf("first Start of a new sandbox: outcome %q, want %q", out, sandbox.OutcomeCreated)
	}
	want(sandbox.StatusRunning)
	id := sb.ID()
	if out, err := sb.Start(ctx); err != nil || out != sandbox.OutcomeConnected {
		t.Fatalf("second Start = %q, %v; want %q, nil", out, err, sandbox.OutcomeConnected)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.ID != sb.ID() || info.Name != sb.Name() || info.Provider != sb.Provider() || info.Status != sandbox.StatusRunning {
		t.Fatalf("Info = {ID %q Name %q Provider %q Status %q}, want {%q %q %q %q}",
			info.ID, info.Name, info.Provider, info.Status, sb.ID(), sb.Name(), sb.Provider(), sandbox.StatusRunning)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want(sandbox.StatusStopped)
	if info, err := sb.Info(ctx); err != nil || info.Status != sandbox.StatusStopped {
		t.Fatalf("Info after Stop = %+v, %v; want status stopped", info, err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	want(sandbox.StatusStopped)
	// A stopped sandbox is found again, not made anew (Mastra's
	// "created then connected").
	if out, err := sb.Start(ctx); err != nil || out != sandbox.OutcomeConnected {
		t.Fatalf("Start after Stop = %q, %v; want %q", out, err, sandbox.OutcomeConnected)
	}
	want(sandbox.StatusRunning)
	if sb.ID() != id {
		t.Fatalf("id changed across stop/start: %q → %q", id, sb.ID())
	}
	if got := mustSucceed(ctx, t, sb, "echo", "again"); got != "again\n" {
		t.Fatalf("echo after restart: %q", got)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	want(sandbox.StatusDestroyed)
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if _, err := sb.Start(ctx); !errors.Is(err, sandbox.ErrDestroyed) {
		t.Fatalf("Start after Destroy: err = %v, want ErrDestroyed", err)
	}
	want(sandbox.StatusDestroyed)
	if r, err := sb.ExecuteCommand(ctx, "echo", []string{"zombie"}, nil); err == nil {
		t.Fatalf("ExecuteCommand after Destroy ran: %+v", r)
	} else if !errors.Is(err, sandbox.ErrNotReady) && !errors.Is(err, sandbox.ErrDestroyed) {
		t.Fatalf("ExecuteCommand after Destroy: err = %v, want ErrNotReady or ErrDestroyed", err)
	}
}

// testDestroyPending checks that a sandbox destroyed before it started is destroyed and cannot start.
func (s *suite) testDestroyPending(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy of a pending sandbox: %v", err)
	}
	if st := sb.Status(); st != sandbox.StatusDestroyed {
		t.Fatalf("status = %q, want destroyed", st)
	}
	if _, err := sb.Start(ctx); !errors.Is(err, sandbox.ErrDestroyed) {
		t.Fatalf("Start after Destroy: err = %v, want ErrDestroyed", err)
	}
}

// testConcurrentStart checks that concurrent Starts share one attempt.
func (s *suite) testConcurrentStart(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	const n = 8
	var wg sync.WaitGroup
	outcomes := make([]sandbox.Outcome, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			outcomes[i], errs[i] = sb.Start(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent Start %d: %v", i, errs[i])
		}
		if o := outcomes[i]; o != sandbox.OutcomeCreated && o != sandbox.OutcomeConnected {
			t.Fatalf("concurrent Start %d: outcome %q", i, o)
		}
	}
	if st := sb.Status(); st != sandbox.StatusRunning {
		t.Fatalf("status = %q, want running", st)
	}
	if got := mustSucceed(ctx, t, sb, "echo", "ok"); got != "ok\n" {
		t.Fatalf("echo: %q", got)
	}
}

// testConcurrentStopStart checks concurrent Stops, then concurrent Starts.
func (s *suite) testConcurrentStopStart(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() { errs <- sb.Stop(ctx) })
	}
	wg.Wait()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Stop: %v", err)
		}
	}
	if st := sb.Status(); st != sandbox.StatusStopped {
		t.Fatalf("status after concurrent Stop = %q", st)
	}
	for range 4 {
		wg.Go(func() { _, err := sb.Start(ctx); errs <- err })
	}
	wg.Wait()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Start after Stop: %v", err)
		}
	}
	if got := mustSucceed(ctx, t, sb, "echo", "ok"); got != "ok\n" {
		t.Fatalf("echo: %q", got)
	}
}

// testFirstCommandStarts checks that the first commands start a pending sandbox, once.
func (s *suite) testFirstCommandStarts(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	if st := sb.Status(); st != sandbox.StatusPending {
		t.Fatalf("fresh sandbox status = %q, want pending", st)
	}
	// Concurrent first commands share one start.
	var wg sync.WaitGroup
	results := make([]string, 4)
	for i := range results {
		wg.Go(func() {
			r, err := sb.ExecuteCommand(ctx, "echo", []string{"first", itoa(i)}, nil)
			if err != nil {
				results[i] = "error: " + err.Error()
				return
			}
			results[i] = r.Stdout
		})
	}
	wg.Wait()
	for i, got := range results {
		if want := "first " + itoa(i) + "\n"; got != want {
			t.Fatalf("first command %d: %q, want %q", i, got, want)
		}
	}
	if st := sb.Status(); st != sandbox.StatusRunning {
		t.Fatalf("status after first command = %q, want running", st)
	}
	// A stopped sandbox is restarted by the next command too.
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustSucceed(ctx, t, sb, "echo", "revived"); got != "revived\n" {
		t.Fatalf("command after Stop: %q", got)
	}
	if st := sb.Status(); st != sandbox.StatusRunning {
		t.Fatalf("status after command on a stopped sandbox = %q, want running", st)
	}
}

// testStopStartCycles checks that a sandbox runs commands across several stop/start cycles.
func (s *suite) testStopStartCycles(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	for i := range 3 {
		if got := mustSucceed(ctx, t, sb, "echo", "cycle", itoa(i)); got != "cycle "+itoa(i)+"\n" {
			t.Fatalf("cycle %d: %q", i, got)
		}
		if err := sb.Stop(ctx); err != nil {
			t.Fatalf("cycle %d: Stop: %v", i, err)
		}
		if st := sb.Status(); st != sandbox.StatusStopped {
			t.Fatalf("cycle %d: status %q after Stop", i, st)
		}
	}
}

// testProcessesStart checks that the process manager starts a pending sandbox.
func (s *suite) testProcessesStart(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	if _, err := sb.Processes().List(ctx); err != nil {
		t.Fatalf("List on a pending sandbox: %v", err)
	}
	if st := sb.Status(); st != sandbox.StatusRunning {
		t.Fatalf("status after List = %q, want running", st)
	}
}

// testStopEndsProcesses checks that Stop ends background processes and their children.
func (s *suite) testStopEndsProcesses(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	dir := s.scratch(t, sb)
	pidFile := dir + "/stop.pid"
	p, err := sb.Processes().Spawn(ctx, "sleep 30 & echo $! > "+sandbox.ShellQuote(pidFile)+"; wait", nil)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	waitPIDFile(ctx, t, sb, pidFile)
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if r, err := p.Wait(wctx); err != nil && wctx.Err() != nil {
		t.Fatalf("Wait on a process of a stopped sandbox did not return: %v (result %+v)", err, r)
	}
	if _, exited := p.ExitCode(); !exited {
		t.Fatal("process still running after Stop")
	}
	if s.opts.PersistentFiles {
		assertGone(ctx, t, sb, pidFile) // restarts the sandbox
	}
}

// testPersistentFiles checks that files survive Stop and Start, for engines claiming it.
func (s *suite) testPersistentFiles(t *testing.T) {
	if !s.opts.PersistentFiles {
		t.Skip("engine does not claim Options.PersistentFiles")
	}
	ctx := s.context(t)
	sb := s.newSandbox(t)
	dir := s.scratch(t, sb)
	f := dir + "/state.txt"
	mustSucceed(ctx, t, sb, "sh -c 'printf %s \"$1\" > \"$2\"' sh", "kept across restarts", f)
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustSucceed(ctx, t, sb, "cat", f); got != s.out("kept across restarts") {
		t.Fatalf("file after stop/start: %q", got)
	}
	if got := mustSucceed(ctx, t, sb, "pwd"); !strings.HasPrefix(got, "/") {
		t.Fatalf("pwd after restart: %q", got)
	}
}

// testShutdown checks that Destroy ends every process and leaves none
// tracked.
func (s *suite) testShutdown(t *testing.T) {
	ctx := s.context(t)
	sb := s.newSandbox(t)
	pm := sb.Processes()
	var procs []sandbox.Process
	for _, cmd := range []string{"sleep 30", "sleep 30 & wait", "cat"} {
		p, err := pm.Spawn(ctx, cmd, nil)
		if err != nil {
			t.Fatalf("Spawn %q: %v", cmd, err)
		}
		procs = append(procs, p)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	for _, p := range procs {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := p.Wait(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("process %s (%s) still waiting 10s after Destroy: %v", p.PID(), p.Command(), err)
		}
		if _, exited := p.ExitCode(); !exited {
			t.Fatalf("process %s (%s) not exited after Destroy", p.PID(), p.Command())
		}
	}
	list, err := pm.List(ctx)
	if err == nil && len(list) != 0 {
		t.Fatalf("processes still tracked after Destroy: %+v", list)
	}
	if err != nil && !errors.Is(err, sandbox.ErrNotReady) && !errors.Is(err, sandbox.ErrDestroyed) {
		t.Fatalf("List after Destroy: %v, want an empty list or ErrNotReady/ErrDestroyed", err)
	}
}
