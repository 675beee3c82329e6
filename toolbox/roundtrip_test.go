package toolbox_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// requestLog counts the requests a handler gets, by method and path.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// take returns the requests seen since the last take.
func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seen
	l.seen = nil
	return s
}

// TestFollowEndedRoundTrips: following a command that has already ended
// costs two requests on Daytona's daemon (a look at the command, then its
// whole log; no socket, which would linger a second and tell no exit
// code), and one with agentbox's frames extension (the socket, whose
// close tells the exit code) — so a short streaming command costs its
// exec and these.
func TestFollowEndedRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		mode serverMode
		want []string
	}{
		{daytona, []string{"GET /process/session/s/command/ID", "GET /process/session/s/command/ID/logs"}},
		{extended, []string{"GET /process/session/s/command/ID/logs"}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			srv, err := daemon.New(daemon.Options{WorkDir: t.TempDir(), Daytona: tc.mode == daytona})
			if err != nil {
				t.Fatal(err)
			}
			var log requestLog
			hs := httptest.NewServer(log.wrap(srv))
			t.Cleanup(func() {
				srv.Close()
				hs.Close()
			})
			c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: hs.URL})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := ctxT(t)
			if err := c.CreateSession(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: "echo out; echo err >&2; " + tc.mode.exit(4), RunAsync: true})
			if err != nil {
				t.Fatal(err)
			}
			// Wait (out of the count) until the command has ended.
			for {
				cmd, err := c.GetCommand(ctx, "s", r.CmdID)
				if err != nil {
					t.Fatal(err)
				}
				if cmd.ExitCode != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			log.take()
			var out, errb bytes.Buffer
			fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, &errb)
			if err != nil || fr.ExitCode == nil || *fr.ExitCode != 4 || out.String() != "out\n" || errb.String() != "err\n" {
				t.Fatalf("follow: %+v (exit %v), stdout %q, stderr %q, %v", fr, fr.ExitCode, out.String(), errb.String(), err)
			}
			got := log.take()
			if len(got) != len(tc.want) {
				t.Fatalf("requests %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if want := strings.ReplaceAll(w, "ID", r.CmdID); got[i] != want {
					t.Errorf("request %d: %s, want %s", i, got[i], want)
				}
			}
		})
	}
}
