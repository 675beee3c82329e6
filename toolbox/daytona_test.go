package toolbox_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// The client against the daemon's Daytona-behaviour mode: Daytona's quirks
// that used to lose input, and the follow socket's close tail.

// Input sent right after an async exec reaches the command: Daytona's
// daemon refuses it (500 "failed to open input pipe") until the command's
// input pipe exists, and the client retries.
func TestDaytonaInputRightAfterExec(t *testing.T) {
	c, ctx := sessionEnv(t, daytona, "s")
	for i := range 10 {
		r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: `read l; echo "got:$l"`, RunAsync: true, SuppressInputEcho: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SendInput(ctx, "s", r.CmdID, []byte(fmt.Sprint("x", i))); err != nil {
			t.Fatalf("try %d: input right after the exec: %v", i, err)
		}
		var out bytes.Buffer
		fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, nil)
		if err != nil || fr.ExitCode == nil || *fr.ExitCode != 0 || out.String() != fmt.Sprint("got:x", i, "\n") {
			t.Fatalf("try %d: follow = %+v, %v; stdout %q", i, fr, err, out.String())
		}
	}
}

// A follow learns the exit code from the command while Daytona's socket
// lingers, and reads what remains by offset: it does not wait for the
// socket's close tail, and writes every byte once. The expected output is
// what each server gives: Daytona's drops NUL bytes and ends a last line
// that has no newline.
func TestFollowExactWithoutTail(t *testing.T) {
	const size = 3<<20 + 1
	yes := strings.Repeat("0123456789abcdef\n", size/17+1)[:size]
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			// Daytona's follow socket lingers after the command's end; here
			// it would linger for an hour: a client that waited for it
			// would not finish within the test's deadline.
			c, _ := daemonEnvV(t, mode, true, toolbox.ClientOptions{}, func(o *daemon.Options) { o.DaytonaCloseTail = time.Hour })
			if err := c.CreateSession(ctxT(t), "s"); err != nil {
				t.Fatal(err)
			}
			// Megabytes through the race detector on a loaded machine take
			// a while.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, tc := range []struct {
				name, command    string
				stdout, stderr   string // as agentbox's server gives them
				dstdout, dstderr string // as Daytona's does
			}{
				{name: "true", command: "true"},
				{name: "no final newline", command: `printf 'a\nb'; printf 'c' >&2`, stdout: "a\nb", stderr: "c", dstdout: "a\nb\n", dstderr: "c\n"},
				{name: "not UTF-8", command: `printf 'a\377b'; printf '\376' >&2`, stdout: "a\xffb", stderr: "\xfe", dstdout: "a\xffb\n", dstderr: "\xfe\n"},
				{name: "NUL", command: `printf 'x\0y\n\0'; printf '\0e' >&2`, stdout: "x\x00y\n\x00", stderr: "\x00e", dstdout: "xy\n", dstderr: "e\n"},
				{name: "multi-MB", command: fmt.Sprintf(`yes 0123456789abcdef | head -c %d; printf 'x\0y' >&2; printf 'tail\0'`, size),
					stdout: yes + "tail\x00", stderr: "x\x00y", dstdout: yes + "tail\n", dstderr: "xy\n"},
			} {
				r, err := c.SessionExecute(ctx, "s", toolbox.SessionExecuteRequest{Command: tc.command, RunAsync: true})
				if err != nil {
					t.Fatal(err)
				}
				var out, errb bytes.Buffer
				fr, err := c.FollowLogs(ctx, "s", r.CmdID, &out, &errb)
				if err != nil || fr.ExitCode == nil || *fr.ExitCode != 0 {
					t.Fatalf("%s: follow = %+v, %v", tc.name, fr, err)
				}
				wantOut, wantErr := tc.stdout, tc.stderr
				if mode == daytona {
					wantOut, wantErr = tc.dstdout, tc.dstderr
				}
				if out.String() != wantOut || errb.String() != wantErr {
					t.Errorf("%s: stdout %d bytes, stderr %q; want %d bytes, %q (stdout ends %q, want %q)", tc.name,
						out.Len(), errb.String(), len(wantOut), wantErr, tail(out.String()), tail(wantOut))
				}
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-12):] }
