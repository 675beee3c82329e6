package process

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// pids returns the ids List reports.
func pids(t *testing.T, m *Manager) []string {
	t.Helper()
	infos, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.PID)
	}
	return out
}

// A process spawned through one Manager is listed, read, fed, waited for
// and killed through another one of the same sandbox.
func TestReattach(t *testing.T) {
	for _, sm := range serverModes {
		t.Run(sm.name, func(t *testing.T) {
			h := newHarness(t, sm.with(harnessOptions{}))
			other := h.another(t).m
			ctx := context.Background()
			line := `echo "out 1"; echo 'err 1' >&2; read x; echo "got:$x"; exit 3`
			p := spawn(t, h, line, &sandbox.ExecOptions{Env: map[string]string{"A": "it's"}, Cwd: h.dir})
			waitFor(t, "the first output", func() bool { return p.Stdout() == "out 1\n" && p.Stderr() == "err 1\n" })

			infos, err := other.List(ctx)
			if err != nil || len(infos) != 1 || infos[0] != (sandbox.ProcessInfo{PID: p.PID(), Command: line, Running: true}) {
				t.Fatalf("List through the other Manager = %+v, %v", infos, err)
			}
			q, err := other.Get(ctx, p.PID())
			if err != nil {
				t.Fatal(err)
			}
			// The output so far is there when Get returns.
			if q.PID() != p.PID() || q.Command() != line || q.Stdout() != "out 1\n" || q.Stderr() != "err 1\n" {
				t.Errorf("reattached: pid %q command %q stdout %q stderr %q", q.PID(), q.Command(), q.Stdout(), q.Stderr())
			}
			if _, exited := q.ExitCode(); exited {
				t.Error("a running process reattached as exited")
			}
			if again, err := other.Get(ctx, p.PID()); err != nil || again != q {
				t.Errorf("second Get of a running process = %v, %v; want the tracked value", again, err)
			}
			if err := q.SendStdin(ctx, []byte("hi\n")); err != nil {
				t.Fatal(err)
			}
			want := "out 1\ngot:hi\n"
			for _, proc := range []sandbox.Process{p, q} {
				r := wait(t, proc)
				if r.ExitCode != 3 || r.Stdout != want || r.Stderr != "err 1\n" || r.Killed {
					t.Errorf("result through %s: %+v", map[bool]string{true: "the spawner", false: "the other"}[proc == p], r)
				}
			}
			// Exited: listed by both, with its code, until a Get forgets it
			// for the whole sandbox.
			for _, m := range []*Manager{h.m, other} {
				if infos, _ := m.List(ctx); len(infos) != 1 || infos[0].Running || infos[0].ExitCode == nil || *infos[0].ExitCode != 3 {
					t.Errorf("List after the exit: %+v", infos)
				}
			}
			if got, err := other.Get(ctx, p.PID()); err != nil || got != q {
				t.Errorf("Get of the exited process = %v, %v", got, err)
			}
			if l := pids(t, h.m); len(l) != 0 {
				t.Errorf("the spawner lists %v after the other Manager forgot the process", l)
			}
			if _, err := other.Get(ctx, p.PID()); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("Get of a forgotten process: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestReattachKill(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	oh := h.another(t)
	other := oh.m
	ctx := context.Background()
	p := spawn(t, h, "echo up; sh -c 'sleep 60 & echo $! > gc.pid; wait'", nil)
	pid := readPID(t, filepath.Join(h.dir, "gc.pid"))
	// Manager.Kill of a process it does not track: describe and delete the
	// session.
	if ok, err := other.Kill(ctx, p.PID()); !ok || err != nil {
		t.Fatalf("Kill through the other Manager = %v, %v", ok, err)
	}
	if n, log := oh.requests(); n != 2 {
		t.Errorf("Kill of an untracked process made %d requests, want 2: %v", n, log)
	}
	if r := wait(t, p); r.ExitCode != sandbox.ExitKilled || !r.Killed {
		t.Errorf("the spawner's result after a kill elsewhere: %+v", r)
	}
	waitGone(t, pid)
	if ok, err := other.Kill(ctx, p.PID()); ok || err != nil {
		t.Errorf("second Kill = %v, %v", ok, err)
	}
	// The exited process is forgotten by Kill, which reports false.
	q := spawn(t, h, "exit 4", nil)
	wait(t, q)
	if ok, err := other.Kill(ctx, q.PID()); ok || err != nil {
		t.Errorf("Kill of an exited process = %v, %v", ok, err)
	}
	if l := pids(t, h.m); len(l) != 0 {
		t.Errorf("processes left: %v", l)
	}
	if ok, err := other.Kill(ctx, "not-a-number"); ok || err != nil {
		t.Errorf("Kill of a malformed id = %v, %v", ok, err)
	}
}

// TestKillBeforeFollow: a process whose session another Manager deletes
// before its spawner's log follow reaches the daemon ends killed (137), not
// with an error (the follow then finds no session).
func TestKillBeforeFollow(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	other := h.another(t).m
	held, release := make(chan struct{}, 1), make(chan struct{})
	gate := func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/logs") {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		}
	}
	h.rt.gate.Store(&gate)
	p := spawn(t, h, "sleep 60", nil)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the spawner never followed the output")
	}
	if ok, err := other.Kill(context.Background(), p.PID()); !ok || err != nil {
		close(release)
		t.Fatalf("Kill through the other Manager = %v, %v", ok, err)
	}
	close(release)
	if r := wait(t, p); r.ExitCode != sandbox.ExitKilled || !r.Killed {
		t.Errorf("the spawner's result after a kill before its follow: %+v", r)
	}
}

func TestAttach(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	other := h.another(t).m
	ctx := context.Background()
	p := spawn(t, h, "printf 'abc'; printf 'E' >&2; read x; printf 'def'", nil)
	waitFor(t, "the first output", func() bool { return p.Stdout() == "abc" && p.Stderr() == "E" })

	// Writers get the whole output, what came before Attach first.
	var out, errb syncBuffer
	a, err := other.Attach(ctx, p.PID(), &sandbox.AttachOptions{Stdout: &out, Stderr: &errb, MaxRetainedBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "abc" || errb.String() != "E" || a.Stdout() != "abc" {
		t.Errorf("at Attach: writers %q %q, retained %q", out.String(), errb.String(), a.Stdout())
	}
	if err := a.SendStdin(ctx, []byte("\n")); err != nil {
		t.Fatal(err)
	}
	r := wait(t, a)
	if r.ExitCode != 0 || r.Stdout != "cdef" || r.StdoutDroppedBytes != 2 || out.String() != "abcdef" || errb.String() != "E" {
		t.Errorf("after the exit: result %+v, writers %q %q", r, out.String(), errb.String())
	}
	// Attach never forgets; an exited process's output is replayed whole.
	for range 2 {
		var all syncBuffer
		b, err := other.Attach(ctx, p.PID(), &sandbox.AttachOptions{Stdout: &all, MaxRetainedBytes: sandbox.Unlimited})
		if err != nil {
			t.Fatal(err)
		}
		if code, ok := b.ExitCode(); !ok || code != 0 || b.Stdout() != "abcdef" || all.String() != "abcdef" {
			t.Errorf("Attach after the exit: code %d, %v, stdout %q, writer %q", code, ok, b.Stdout(), all.String())
		}
	}
	if l := pids(t, other); !slices.Equal(l, []string{p.PID()}) {
		t.Errorf("List after Attach = %v", l)
	}
	if _, err := other.Attach(ctx, "42", nil); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Attach of an unknown id: %v", err)
	}
	if _, err := other.Attach(ctx, p.PID(), &sandbox.AttachOptions{MaxRetainedBytes: -5}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("Attach with MaxRetainedBytes -5: %v", err)
	}
}

// Detach leaves the processes running and known; Close kills only what
// the Manager spawned.
func TestDetachAndClose(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	first := h.another(t).m
	p, err := first.Spawn(ctx, "read x; echo \"got:$x\"", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrDetached) {
		t.Errorf("Wait after Detach: %v, want ErrDetached", err)
	}
	if _, exited := p.ExitCode(); exited {
		t.Error("a detached process reports an exit")
	}
	if infos, err := h.m.List(ctx); err != nil || len(infos) != 1 || !infos[0].Running {
		t.Fatalf("List after Detach = %+v, %v", infos, err)
	}

	// A second handle reattaches, then closes: the process it did not
	// spawn runs on, the one it spawned is killed and forgotten.
	second := h.another(t).m
	q, err := second.Get(ctx, p.PID())
	if err != nil {
		t.Fatal(err)
	}
	own, err := second.Spawn(ctx, "sleep 60", nil)
	if err != nil {
		t.Fatal(err)
	}
	done, err := second.Spawn(ctx, "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, own); r.ExitCode != sandbox.ExitKilled || !r.Killed {
		t.Errorf("spawned process after Close: %+v", r)
	}
	if _, err := q.Wait(ctx); !errors.Is(err, ErrDetached) {
		t.Errorf("Wait of a reattached process after Close: %v, want ErrDetached", err)
	}
	if l := pids(t, h.m); !slices.Equal(l, []string{p.PID()}) {
		t.Errorf("List after Close of the second Manager = %v, want only %s", l, p.PID())
	}

	r, err := h.m.Get(ctx, p.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SendStdin(ctx, []byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, r); res.ExitCode != 0 || res.Stdout != "got:late\n" {
		t.Errorf("result after reattaching: %+v", res)
	}
	// A detached value can still kill its process.
	s, err := first.Spawn(ctx, "sleep 60", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Kill(ctx); !ok || err != nil {
		t.Errorf("Kill of a detached value = %v, %v", ok, err)
	}
	if res, err := s.Wait(ctx); err != nil || res.ExitCode != sandbox.ExitKilled {
		t.Errorf("Wait after killing a detached value: %+v, %v", res, err)
	}
}

// Concurrent spawns through several Managers get distinct ids, from 1 up;
// ids restart above the highest live one.
func TestSpawnIDs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	managers := []*Manager{h.m, h.another(t).m, h.another(t).m}
	const n = 9
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := managers[i%len(managers)].Spawn(ctx, "sleep 60", nil)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = p.PID()
		})
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + strings.Compare(a, b) })
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}
	if !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	if l := pids(t, h.m); !slices.Equal(l, want) {
		t.Errorf("List = %v, want %v", l, want)
	}
	for _, pid := range []string{"9", "5"} {
		if ok, err := h.m.Kill(ctx, pid); !ok || err != nil {
			t.Fatalf("Kill(%s) = %v, %v", pid, ok, err)
		}
	}
	p, err := h.m.Spawn(ctx, "true", nil)
	if err != nil || p.PID() != "9" {
		t.Errorf("Spawn after killing 9 and 5: pid %v, %v; want 9", p, err)
	}
}

func TestParseScript(t *testing.T) {
	lines := []string{
		"echo hi", "ls", "", "it's", `a '\'' b`, "eval 'x'", "(x)", "x ) y", " </dev/null",
		"printf '%s\\n' \"$HOME\" && cd / && export A=1", "multi\nline\n", "tab\there", "日本語 🚀",
		`\`, `'`, `''`, `\'`, "a=b", "cd x && eval y",
	}
	envs := []map[string]string{nil, {"A": "1"}, {"B": "it's", "A_1": "", "Z": "x && cd /"}}
	for _, line := range lines {
		for _, env := range envs {
			for _, cwd := range []string{"", "/tmp", "/a dir/it's"} {
				for _, stdinNull := range []bool{false, true} {
					for _, build := range []func(string, map[string]string, string, bool) (string, error){buildScript, buildFresh} {
						script, err := build(line, env, cwd, stdinNull)
						if err != nil {
							t.Fatal(err)
						}
						if got := commandLine(script); got != line {
							t.Errorf("commandLine(%q) = %q; want %q", script, got, line)
						}
					}
				}
			}
		}
	}
	for _, foreign := range []string{
		"sleep 30", "(eval 'x'", "eval 'x' y", "export =1 && eval x", "eval 'a'b'", "cd /tmp && eval x y",
		"eval 'x'", "export A=1 && eval 'x'", "cd /tmp || exit", "(cd /tmp || exit; x)", "export A='1 || exit; x",
	} {
		if got, ok := parseScript(foreign); ok {
			t.Errorf("parseScript(%q) = %q, true; want false", foreign, got)
		}
		if got := commandLine(foreign); got != foreign {
			t.Errorf("commandLine(%q) = %q", foreign, got)
		}
	}
}

// A value tracked by one Manager goes stale when another Manager makes the
// sandbox forget its process and a new process takes the id: Get, Kill and
// Close then act on the new process, or leave it alone, never on the old
// value's behalf.
func TestStaleTrackedValue(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	first, second := h.another(t).m, h.another(t).m
	old, err := first.Spawn(ctx, "echo old", nil)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, old)
	if _, err := second.Get(ctx, old.PID()); err != nil { // forgets it
		t.Fatal(err)
	}
	newer, err := second.Spawn(ctx, "sleep 60", nil)
	if err != nil || newer.PID() != old.PID() {
		t.Fatalf("Spawn after the forget: %v, %v; want id %s again", newer, err, old.PID())
	}
	// Close of the spawner of the old process leaves the new one alone.
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if infos, err := h.m.List(ctx); err != nil || len(infos) != 1 || !infos[0].Running || infos[0].Command != "sleep 60" {
		t.Fatalf("List after Close = %+v, %v", infos, err)
	}

	third, err := h.m.Spawn(ctx, "echo third", nil)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, third)
	if ok, err := second.Kill(ctx, third.PID()); ok || err != nil { // exited: forgets it
		t.Fatalf("Kill of the exited third process = %v, %v", ok, err)
	}
	fourth, err := second.Spawn(ctx, "sleep 61", nil)
	if err != nil || fourth.PID() != third.PID() {
		t.Fatalf("Spawn: %v, %v; want id %s again", fourth, err, third.PID())
	}
	got, err := h.m.Get(ctx, third.PID())
	if err != nil {
		t.Fatal(err)
	}
	if got == third || got.Command() != "sleep 61" {
		t.Fatalf("Get of a reused id returned the process of %q; want the new process", got.Command())
	}
	if ok, err := h.m.Kill(ctx, third.PID()); !ok || err != nil {
		t.Fatalf("Kill of the reused id = %v, %v", ok, err)
	}
	if r := wait(t, fourth); r.ExitCode != sandbox.ExitKilled {
		t.Errorf("the new process after Kill: %+v", r)
	}
}
