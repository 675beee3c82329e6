package toolbox

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// How the client copes with the quirks of Daytona's own daemon (which
// agentbox's server reproduces in its Daytona-behaviour mode, for tests;
// see docs/protocol.md).

// Messages of Daytona's daemon the client recognises.
const (
	// daytonaNoInputPipe: input sent before an async command's input
	// pipe exists (right after the exec) gets a 500 with this message.
	daytonaNoInputPipe = "failed to open input pipe"
	// daytonaNoSession: an exec in an unknown session gets a 500 with
	// this message, where agentbox's server answers 404.
	daytonaNoSession = "session not found"
)

// inputPipeWait bounds how long input is retried while the command's
// input pipe does not exist yet; the retries back off from
// inputPipeFirstRetry to inputPipeMaxRetry.
const (
	inputPipeWait       = 5 * time.Second
	inputPipeFirstRetry = 2 * time.Millisecond
	inputPipeMaxRetry   = 100 * time.Millisecond
)

// isServerError reports whether err is a 500 answer whose message holds msg.
func isServerError(err error, msg string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusInternalServerError && strings.Contains(ae.Message, msg)
}

// daytonaSessionMissing reports whether e is Daytona's answer to an exec in
// an unknown session: a 500 that means 404.
func daytonaSessionMissing(e *APIError) bool {
	return e.StatusCode == http.StatusInternalServerError && strings.Contains(e.Message, daytonaNoSession)
}

// retryInputPipe runs send, again after a growing pause while it fails
// because the command's input pipe does not exist yet (Daytona's daemon
// creates it only once the command runs), for at most inputPipeWait.
func retryInputPipe(ctx context.Context, send func() error) error {
	deadline := time.Now().Add(inputPipeWait)
	pause := inputPipeFirstRetry
	for {
		err := send()
		if err == nil || !isServerError(err, daytonaNoInputPipe) || time.Now().Add(pause).After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, inputPipeMaxRetry)
	}
}

// The pauses between the looks a follow without the frames extension takes
// at its command while the socket is open: from exitPollFirst growing by
// half to exitPollMax, and to exitPollLongMax once the command has run for
// exitPollLongAfter.
const (
	exitPollFirst     = 5 * time.Millisecond
	exitPollMax       = 50 * time.Millisecond
	exitPollLongAfter = 5 * time.Second
	exitPollLongMax   = 250 * time.Millisecond
)

// socketQuiet is how long a follow socket must have brought nothing, once
// the command has ended, before the follow leaves it and reads the log's
// rest: while the socket still delivers the backlog (or closes, as
// agentbox's server does once everything was sent) reading it is cheaper
// than fetching the whole log. Daytona's daemon sends new output every
// 20 ms.
const socketQuiet = 30 * time.Millisecond

// restSDKVersion is the SDK version announced on the request that reads a
// log's rest: below 0.167.0 Daytona's daemon answers GET …/logs with the
// raw marked log as text/plain, the same bytes as its follow socket, where
// newer versions get JSON, whose strings turn bytes that are not UTF-8
// into U+FFFD (and which repeats the output split into stdout and stderr).
const restSDKVersion = "0.166.0"

// exitWatch looks at a command (GET …/command/{id}) while its log is
// followed over a socket that does not tell the exit code: Daytona's socket
// closes about a second after the command ended, which a follow that
// learns the exit code meanwhile need not wait for. ctx, the follow's
// reading context, is cancelled once the exit code is known and the socket
// has been quiet for socketQuiet.
type exitWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	code   *int // read after stop
}

// watchExit starts watching f's command. Call stop when the follow ends.
func (f *follower) watchExit(ctx context.Context) *exitWatch {
	w := &exitWatch{done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		start := time.Now()
		pause := exitPollFirst
		first := time.Duration(0)
		if f.looked {
			first = pause // the command was looked at a moment ago
		}
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-w.ctx.Done():
				return
			case <-t.C:
			}
			if w.code == nil && f.exit != nil {
				// The caller brings the exit code: no looks.
				if w.code = f.learnExit(w.ctx); w.ctx.Err() != nil {
					return
				}
			} else if w.code == nil {
				cmd, err := f.c.GetCommand(w.ctx, f.sid, f.cid)
				if err != nil {
					return // the socket tells the rest
				}
				w.code = cmd.ExitCode
			}
			if w.code != nil {
				quiet := time.Since(time.Unix(0, f.active.Load()))
				if quiet >= socketQuiet {
					w.cancel()
					return
				}
				t.Reset(socketQuiet - quiet)
				continue
			}
			limit := exitPollMax
			if time.Since(start) > exitPollLongAfter {
				limit = exitPollLongMax
			}
			pause = min(pause*3/2, limit)
			t.Reset(pause)
		}
	}()
	return w
}

// fetchRest fetches a command's whole log to read the part the socket did
// not bring (feedLogs skips by offset what was consumed): as raw text
// (restSDKVersion), or as JSON from a server that gives nothing else.
func (f *follower) fetchRest(ctx context.Context) (*logsAnswer, error) {
	return f.c.logs(ctx, f.sid, f.cid, http.Header{HeaderSDKVersion: {restSDKVersion}})
}

// stop ends the watch and returns the exit code it learned, or nil.
func (w *exitWatch) stop() *int {
	w.cancel()
	<-w.done
	return w.code
}
