package toolbox_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// FollowLogsWith's Exit: the caller brings the exit code (the process
// manager's waiter on Daytona's daemon), and the follow looks at the
// command no more.

// countedDaytona serves the daemon's Daytona-behaviour mode through a
// request log, with session "s", and returns a client, a second client
// outside the count and the log.
func countedDaytona(t *testing.T) (c, other *toolbox.Client, log *requestLog) {
	t.Helper()
	srv, err := daemon.New(daemon.Options{WorkDir: t.TempDir(), Daytona: true})
	if err != nil {
		t.Fatal(err)
	}
	log = &requestLog{}
	hs := httptest.NewServer(log.wrap(srv))
	free := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		free.Close()
	})
	for _, p := range []**toolbox.Client{&c, &other} {
		url := hs.URL
		if p == &other {
			url = free.URL
		}
		if *p, err = toolbox.NewClient(toolbox.ClientOptions{BaseURL: url}); err != nil {
			t.Fatal(err)
		}
		cl := *p
		t.Cleanup(func() { cl.Close() })
	}
	if err := c.CreateSession(ctxT(t), "s"); err != nil {
		t.Fatal(err)
	}
	return c, other, log
}

// waitEnded waits, through c, until command cid of session s has ended,
// and returns its exit code.
func waitEnded(ctx context.Context, t *testing.T, c *toolbox.Client, cid string) int {
	for {
		cmd, err := c.GetCommand(ctx, "s", cid)
		if err != nil {
			t.Error(err)
			return -1
		}
		if cmd.ExitCode != nil {
			return *cmd.ExitCode
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startAsync runs command asynchronously in session "s" and returns its id.
func startAsync(ctx context.Context, t *testing.T, c *toolbox.Client, command string) string {
	t.Helper()
	r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: command, RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	return r.CmdID
}

// An exit code the caller already has makes the follow of an ended
// command one request: the whole log, no look at the command, no socket.
func TestFollowExitGivenOneRequest(t *testing.T) {
	c, other, log := countedDaytona(t)
	ctx := ctxT(t)
	cid := startAsync(ctx, t, c, "echo out; echo err >&2; (exit 4)")
	exit := make(chan int, 1)
	exit <- waitEnded(ctx, t, other, cid)
	log.take()
	var out, errb bytes.Buffer
	fr, err := c.FollowLogsWith(ctx, "s", cid, &out, &errb, toolbox.FollowOptions{Exit: exit})
	if err != nil || fr.ExitCode == nil || *fr.ExitCode != 4 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("follow = %+v, %v; stdout %q stderr %q", fr, err, out.String(), errb.String())
	}
	if got := log.take(); len(got) != 1 || got[0] != "GET /process/session/s/command/"+cid+"/logs" {
		t.Errorf("requests %q, want the log alone", got)
	}
}

// An exit code that comes while the socket streams ends the follow without
// a look at the command and without the socket's close tail: the socket
// and one read of the log's rest.
func TestFollowExitDuringStream(t *testing.T) {
	c, other, log := countedDaytona(t)
	ctx := ctxT(t)
	cid := startAsync(ctx, t, c, "echo a; sleep 0.5; echo b; (exit 6)")
	log.take()
	exit := make(chan int, 1)
	go func() { exit <- waitEnded(ctx, t, other, cid) }()
	var out bytes.Buffer
	fr, err := c.FollowLogsWith(ctx, "s", cid, &out, nil, toolbox.FollowOptions{Exit: exit, ExitGrace: time.Millisecond})
	if err != nil || fr.ExitCode == nil || *fr.ExitCode != 6 || out.String() != "a\nb\n" {
		t.Fatalf("follow = %+v, %v; stdout %q", fr, err, out.String())
	}
	got := log.take()
	if len(got) > 2 {
		t.Errorf("requests %q, want the socket and at most one read of the log", got)
	}
	for _, g := range got {
		if !strings.HasSuffix(g, "/logs") {
			t.Errorf("request %s: want none but the log's", g)
		}
	}
}

// A caller that closes Exit without a code leaves the follow to look at the
// command itself: the code and the output are still right.
func TestFollowExitClosedFallsBack(t *testing.T) {
	c, _, _ := countedDaytona(t)
	ctx := ctxT(t)
	for _, cmd := range []string{"echo x; (exit 3)", "echo x; sleep 0.3; (exit 3)"} {
		cid := startAsync(ctx, t, c, cmd)
		exit := make(chan int)
		close(exit)
		var out bytes.Buffer
		fr, err := c.FollowLogsWith(ctx, "s", cid, &out, nil, toolbox.FollowOptions{Exit: exit})
		if err != nil || fr.ExitCode == nil || *fr.ExitCode != 3 || out.String() != "x\n" {
			t.Fatalf("%s: follow = %+v, %v; stdout %q", cmd, fr, err, out.String())
		}
	}
}

// A negative ExitGrace is refused before any request.
func TestFollowExitNegativeGrace(t *testing.T) {
	c, _, log := countedDaytona(t)
	log.take()
	_, err := c.FollowLogsWith(ctxT(t), "s", "c", nil, nil, toolbox.FollowOptions{ExitGrace: -time.Second})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "ExitGrace") {
		t.Errorf("err = %v, want ErrInvalidArgument naming ExitGrace", err)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("requests %q, want none", got)
	}
}
