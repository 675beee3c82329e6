package sandboxtest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The Reattach checks: a process seen, fed, waited for and killed through
// a second handle on its sandbox (Options.Reopen).

// reattachSuite is what the Reattach checks share: a sandbox and two
// handles' process managers, a (the sandbox's own) and b (Options.Reopen).
type reattachSuite struct {
	*suite
	sb   sandbox.Sandbox
	a, b sandbox.ProcessManager
}

// checks lists the Reattach checks in the order they run.
func (s *reattachSuite) checks() []check {
	return []check{
		{"ListGetWait", s.testListGetWait},
		{"Kill", s.testKill},
		{"AttachCloseStdin", s.testAttachCloseStdin},
		{"SandboxWidePIDs", s.testSandboxWidePIDs},
		{"Detach", s.testDetach},
	}
}

// testListGetWait checks that another handle lists, reads, feeds and waits for a process.
func (s *reattachSuite) testListGetWait(t *testing.T) {
	a, b := s.a, s.b
	ctx := s.context(t)
	line := `echo out; echo err >&2; read x; echo "got:$x"; exit 3`
	p := s.spawn(t, a, line, nil)
	waitOutput(t, p, "out\n", "err\n")
	if pi := listed(ctx, t, b, p.PID()); pi == nil || !pi.Running || pi.ExitCode != nil || pi.Command != line {
		t.Fatalf("the other handle lists %+v for the running process %s", pi, p.PID())
	}
	q, err := b.Get(ctx, p.PID())
	if err != nil {
		t.Fatalf("Get through the other handle: %v", err)
	}
	if q.PID() != p.PID() || q.Command() != line || q.Stdout() != "out\n" || q.Stderr() != "err\n" {
		t.Fatalf("reattached process: PID %q Command %q Stdout %q Stderr %q; want the output so far at once", q.PID(), q.Command(), q.Stdout(), q.Stderr())
	}
	if _, exited := q.ExitCode(); exited {
		t.Fatal("the reattached process reports an exit while it runs")
	}
	if err := q.SendStdin(ctx, []byte("hi\n")); err != nil {
		t.Fatalf("SendStdin through the other handle: %v", err)
	}
	for _, r := range []*sandbox.CommandResult{s.wait(t, p), s.wait(t, q)} {
		if r.ExitCode != 3 || r.Stdout != "out\ngot:hi\n" || r.Stderr != "err\n" || r.Killed {
			t.Fatalf("result %+v; want exit 3 with the input echoed", r)
		}
	}
	if pi := listed(ctx, t, a, p.PID()); pi == nil || pi.Running || pi.ExitCode == nil || *pi.ExitCode != 3 {
		t.Fatalf("List entry of the exited process: %+v", pi)
	}
	// Get of the exited process through the other handle returns it
	// once, then the sandbox forgets it: neither handle lists it.
	if _, err := b.Get(ctx, p.PID()); err != nil {
		t.Fatalf("Get of the exited process: %v", err)
	}
	if _, err := b.Get(ctx, p.PID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("second Get of the exited process: err = %v, want ErrNotFound", err)
	}
	if pi := listed(ctx, t, a, p.PID()); pi != nil {
		t.Fatalf("a forgotten process is listed: %+v", pi)
	}
}

// testKill checks that another handle kills a process's whole tree.
func (s *reattachSuite) testKill(t *testing.T) {
	sb, a, b := s.sb, s.a, s.b
	ctx := s.context(t)
	dir := s.scratch(t, sb)
	tree, pidFiles := treeScript(dir + "/reattach-kill")
	p := s.spawn(t, a, tree+"wait", nil)
	for _, f := range pidFiles {
		waitPIDFile(ctx, t, sb, f)
	}
	if killed, err := b.Kill(ctx, p.PID()); err != nil || !killed {
		t.Fatalf("Kill through the other handle = %v, %v; want true, nil", killed, err)
	}
	if r := s.wait(t, p); r.ExitCode != sandbox.ExitKilled || !r.Killed {
		t.Fatalf("the spawner's result: exit %d Killed %v; want 137 true", r.ExitCode, r.Killed)
	}
	assertAllGone(ctx, t, sb, pidFiles)
	if _, err := b.Get(ctx, p.PID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Get of a killed process: err = %v, want ErrNotFound", err)
	}
	if killed, err := b.Kill(ctx, p.PID()); err != nil || killed {
		t.Fatalf("second Kill = %v, %v; want false, nil", killed, err)
	}
	if pi := listed(ctx, t, a, p.PID()); pi != nil {
		t.Fatalf("a killed process is listed: %+v", pi)
	}
}

// testAttachCloseStdin checks Attach with a writer and a retention limit, and CloseStdin through it.
func (s *reattachSuite) testAttachCloseStdin(t *testing.T) {
	a, b := s.a, s.b
	ctx := s.context(t)
	p := s.spawn(t, a, `printf 'abc\n'; cat; printf def`, nil)
	waitOutput(t, p, "abc\n", "")
	out := newStreamWriter()
	q, err := b.Attach(ctx, p.PID(), &sandbox.AttachOptions{Stdout: out, MaxRetainedBytes: 5})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if out.String() != "abc\n" || q.Stdout() != "abc\n" {
		t.Fatalf("at Attach: writer %q, Stdout %q; want the output so far", out.String(), q.Stdout())
	}
	if err := q.SendStdin(ctx, []byte("x")); err != nil {
		t.Fatalf("SendStdin: %v", err)
	}
	if !s.closeStdin(ctx, t, q) {
		return
	}
	r := s.wait(t, q)
	if r.ExitCode != 0 || r.Stdout != "\nxdef" || r.StdoutDroppedBytes != 3 || out.String() != "abc\nxdef" {
		t.Fatalf("attached result %+v, writer %q; want the last 5 bytes retained, all written", r, out.String())
	}
	if r := s.wait(t, p); r.Stdout != "abc\nxdef" {
		t.Fatalf("the spawner's result %+v", r)
	}
	// Attach never forgets: the exited process is replayed whole.
	for range 2 {
		q, err := b.Attach(ctx, p.PID(), nil)
		if err != nil {
			t.Fatalf("Attach to the exited process: %v", err)
		}
		if code, ok := q.ExitCode(); !ok || code != 0 || q.Stdout() != "abc\nxdef" {
			t.Fatalf("Attach to the exited process: ExitCode %d, %v, Stdout %q", code, ok, q.Stdout())
		}
	}
	if _, err := b.Attach(ctx, "no-such-process", nil); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Attach(unknown): err = %v, want ErrNotFound", err)
	}
}

// testSandboxWidePIDs checks that concurrent spawns through two handles get distinct ids.
func (s *reattachSuite) testSandboxWidePIDs(t *testing.T) {
	a, b := s.a, s.b
	ctx := s.context(t)
	var mu sync.Mutex
	var pids []string
	var wg sync.WaitGroup
	for i := range 6 {
		pm := []sandbox.ProcessManager{a, b}[i%2]
		wg.Go(func() {
			p, err := pm.Spawn(ctx, "true", nil)
			if err != nil {
				t.Errorf("Spawn: %v", err)
				return
			}
			mu.Lock()
			pids = append(pids, p.PID())
			mu.Unlock()
		})
	}
	wg.Wait()
	if !sortedUnique(pids) {
		t.Fatalf("concurrent spawns through two handles got PIDs %q", pids)
	}
	for _, pid := range pids {
		if listed(ctx, t, a, pid) == nil || listed(ctx, t, b, pid) == nil {
			t.Fatalf("process %s is not listed by both handles", pid)
		}
		b.Kill(ctx, pid)
	}
}

// testDetach checks that a detached handle leaves its processes running for others.
func (s *reattachSuite) testDetach(t *testing.T) {
	sb, a := s.sb, s.a
	ctx := s.context(t)
	c := s.reopen(t, sb)
	d, ok := c.(interface{ Detach(context.Context) error })
	if !ok {
		t.Skip("the engine's handles have no Detach method")
	}
	p, err := c.Processes().Spawn(ctx, `read x; echo "got:$x"`, nil)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	t.Cleanup(func() { a.Kill(context.Background(), p.PID()) })
	if err := d.Detach(ctx); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if _, err := p.Wait(ctx); err == nil {
		t.Fatal("Wait on a detached handle's running process succeeded")
	}
	if pi := listed(ctx, t, a, p.PID()); pi == nil || !pi.Running {
		t.Fatalf("after Detach the process is listed as %+v, want running", pi)
	}
	q, err := a.Get(ctx, p.PID())
	if err != nil {
		t.Fatalf("Get after Detach: %v", err)
	}
	if err := q.SendStdin(ctx, []byte("late\n")); err != nil {
		t.Fatalf("SendStdin after Detach: %v", err)
	}
	if r := s.wait(t, q); r.ExitCode != 0 || r.Stdout != "got:late\n" {
		t.Fatalf("result after Detach: %+v", r)
	}
}
