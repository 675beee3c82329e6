package process

import (
	"context"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The waiter: how a streamed command's end is seen at once, in few
// requests, on a server without the frames extension (Daytona's daemon).
// There the follow socket tells no exit code and lingers about a second
// after the command ended, and the only other source of the code is
// GET …/command/{id}, which would have to be polled. But a session runs
// its commands one at a time, in one shell: a synchronous exec sent right
// after the async one answers only once the async command has ended. So
// the async command notes its exit code in a shell variable of the
// session (noteExit), and the waiter, a synchronous exec of waiterScript,
// prints it: one request, answered when the command ends, brings the code.

// waiterGrace is how long a streamed command's follow waits for the
// waiter before it opens a socket (toolbox.FollowOptions.ExitGrace), on
// top of one round trip (as long as the command's exec took: the waiter's
// answer needs one, which a far control plane makes long); a variable for
// tests, which make it long so that a short command's count of requests
// does not depend on the machine's load.
var waiterGrace = toolbox.DefaultExitGrace

// exitVar is the session shell variable in which a streamed command notes
// its exit code (not __agentbox_*: agentbox's server keeps those of its own
// out of a session's state). A session shell that keeps no unexported
// variable (agentbox's server under a shell other than bash) prints
// "none": the follow then looks at the command itself.
const exitVar = "_agentbox_exit_code"

// noteExit returns script followed by the noting of its exit code; the
// whole keeps script's exit code. The variable is unset first, so that a
// command that never got to note its code (its session was deleted) leaves
// no stale one for the waiter.
func noteExit(script string) string {
	return "unset " + exitVar + "; " + script + "\n" + exitVar + `=$?; (exit "$` + exitVar + `")`
}

// waiterScript prints the exit code the previous command noted, or
// "none".
const waiterScript = `printf '%s' "${` + exitVar + `-none}"`

// startWaiter sends the waiter for the command just started on session
// sid and returns the channel on which its exit code comes; the channel is
// closed without a value when the waiter fails or ctx ends first (then the
// follow looks at the command itself).
func (m *Manager) startWaiter(ctx context.Context, sid string) <-chan int {
	ch := make(chan int, 1)
	m.bg.Go(func() {
		defer close(ch)
		res, err := m.client.SessionExecute(ctx, sid, toolbox.SessionExecuteRequest{Command: waiterScript})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			return
		}
		code, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if err != nil {
			return
		}
		ch <- code
	})
	return ch
}

// useWaiter reports whether a streamed command on this server should note
// its exit code for a waiter: only on a server without the frames
// extension (whose follow tells the exit code itself) and without the
// stateless one (whose commands leave no variable behind).
func (m *Manager) useWaiter(ctx context.Context) bool {
	ext, err := m.client.Extensions(ctx)
	return err == nil && !ext.Frames && !ext.Stateless
}
