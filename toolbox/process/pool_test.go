package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Against a plain Daytona server, which keeps every log until its session
// is deleted, a pooled session is retired after limits.uses commands or
// once its commands printed limits.logBytes; a new session takes its place
// in the background, so the next command makes one request.
func TestPooledSessionRecycled(t *testing.T) {
	for _, sm := range plainModes {
		t.Run(sm.name, func(t *testing.T) { testPooledSessionRecycled(t, sm) })
	}
}

func testPooledSessionRecycled(t *testing.T, sm serverMode) {
	h := newHarness(t, sm.with(harnessOptions{manager: Options{MaxIdleSessions: 1}}))
	h.m.limits.logBytes = 8 << 20 // the count matters, not the size
	uses := h.m.limits.uses
	ctx := context.Background()
	h.exec(t, "true", nil, nil)
	first := h.m.idleSessions()[0]
	for range uses - 2 {
		h.exec(t, "true", nil, nil)
	}
	if idle := h.m.idleSessions(); len(idle) != 1 || idle[0] != first {
		t.Fatalf("after %d uses: idle %v, want [%s]", uses-1, idle, first)
	}
	h.exec(t, "true", nil, nil)
	if err := h.m.bg.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetSession(ctx, first); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("retired session: %v, want ErrNotFound", err)
	}
	idle := h.m.idleSessions()
	if len(idle) != 1 || idle[0] == first {
		t.Fatalf("after %d uses: idle %v, want a new session", uses, idle)
	}
	second := idle[0]
	h.requests()
	if h.exec(t, "true", nil, nil); true {
		if n, log := h.requests(); n != 1 {
			t.Fatalf("the command after a retirement made %d requests, want 1: %v", n, log)
		}
	}

	// Output volume: the server keeps the logs. (Lines, not NUL bytes,
	// which Daytona drops; size is even, so the output ends a line.)
	size := h.m.limits.logBytes
	r := h.exec(t, "yes | head -c "+fmt.Sprint(size), nil, &sandbox.ExecOptions{Stdout: io.Discard, MaxRetainedBytes: 1})
	if r.StdoutDroppedBytes != size-1 {
		t.Fatalf("result %+v", r)
	}
	if err := h.m.bg.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if idle := h.m.idleSessions(); len(idle) != 1 || idle[0] == second {
		t.Fatalf("after %d bytes of output: idle %v, want a new session", size, idle)
	}
	if sessions, err := h.client.ListSessions(ctx); err != nil || len(sessions) != 1 {
		t.Errorf("sessions %v, %v", sessions, err)
	}
}

// With the stateless extension the server drops each command's log once it
// was delivered: a pooled session serves any volume of output, one request
// per command (two when streaming), and is retired only after
// limits.statelessUses commands.
func TestStatelessPoolIgnoresOutputVolume(t *testing.T) {
	const commands = 100
	const size = 128 << 10 // 12.5 MiB in all, beyond limits.logBytes below
	const logBytes = 8 << 20
	cmd := fmt.Sprintf("yes | head -c %d", size)
	ctx := context.Background()

	t.Run("sync", func(t *testing.T) {
		h := newHarness(t, harnessOptions{manager: Options{MaxIdleSessions: 1}})
		h.m.limits.logBytes = logBytes // lower, for speed
		var session string
		for i := range commands {
			r := h.exec(t, cmd, nil, &sandbox.ExecOptions{MaxRetainedBytes: 1})
			if r.ExitCode != 0 || r.StdoutDroppedBytes != size-1 {
				t.Fatalf("command %d: %+v", i, r)
			}
			if idle := h.m.idleSessions(); len(idle) != 1 || (session != "" && idle[0] != session) {
				t.Fatalf("command %d: idle %v, want [%s]", i, idle, session)
			} else {
				session = idle[0]
			}
		}
		if n, log := h.requests(); n != commands+1 {
			t.Fatalf("%d commands made %d requests, want %d (one each and the session create): %v", commands, n, commands+1, log)
		}
		checkLogsDropped(t, h, session)
	})

	t.Run("streaming", func(t *testing.T) {
		h := newHarness(t, harnessOptions{manager: Options{MaxIdleSessions: 1}})
		h.m.limits.logBytes = logBytes
		h.warm(t)
		session := h.m.idleSessions()[0]
		for i := range commands {
			r := h.exec(t, cmd, nil, &sandbox.ExecOptions{Stdout: io.Discard, MaxRetainedBytes: 1})
			if r.ExitCode != 0 || r.StdoutDroppedBytes != size-1 {
				t.Fatalf("command %d: %+v", i, r)
			}
			if n, log := h.requests(); n > 2 {
				t.Fatalf("command %d made %d requests, want 2: %v", i, n, log)
			}
		}
		if idle := h.m.idleSessions(); len(idle) != 1 || idle[0] != session {
			t.Fatalf("idle %v, want [%s]", idle, session)
		}
		checkLogsDropped(t, h, session)
	})

	t.Run("count limit", func(t *testing.T) {
		h := newHarness(t, harnessOptions{manager: Options{MaxIdleSessions: 1}})
		h.m.limits.statelessUses = 5
		h.warm(t)
		first := h.m.idleSessions()[0]
		for range 4 {
			h.exec(t, "true", nil, nil)
		}
		if err := h.m.bg.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if idle := h.m.idleSessions(); len(idle) != 1 || idle[0] == first {
			t.Fatalf("after 5 commands: idle %v, want a new session", idle)
		}
		if _, err := h.client.GetSession(ctx, first); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("retired session: %v, want ErrNotFound", err)
		}
		h.requests()
		h.exec(t, "true", nil, nil)
		if n, log := h.requests(); n != 1 {
			t.Fatalf("the command after a retirement made %d requests, want 1: %v", n, log)
		}
	})
}

// checkLogsDropped checks that the server kept the commands of session
// sid, with their exit codes, but not their logs.
func checkLogsDropped(t *testing.T, h *harness, sid string) {
	t.Helper()
	ctx := context.Background()
	sess, err := h.client.GetSession(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Commands) == 0 {
		t.Fatal("the session lists no commands")
	}
	// The last follow's drop may land a moment after Execute returned.
	for _, c := range sess.Commands[:len(sess.Commands)-1] {
		if c.ExitCode == nil || *c.ExitCode != 0 {
			t.Fatalf("command %s: exit code %v", c.ID, c.ExitCode)
		}
		stdout, stderr, err := h.client.CommandLogs(ctx, sid, c.ID)
		if err != nil || len(stdout)+len(stderr) != 0 {
			t.Fatalf("command %s: %d bytes of log kept, %v", c.ID, len(stdout)+len(stderr), err)
		}
	}
}
