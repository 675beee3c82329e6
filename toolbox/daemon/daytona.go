package daemon

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The Daytona-behaviour mode (Options.Daytona): the server reproduces the
// quirks of Daytona's own daemon that a client can observe, so that clients
// (ours among them) can be tested against them without Daytona. Every
// difference from the normal mode is decided here; the handlers consult
// these methods at the few places where the two modes part.

// daytonaCloseTail is how long, by default, a Daytona follow socket stays
// open after the command ended and no new output came (its daemon closes
// after 50 empty polls of 20 ms).
const daytonaCloseTail = time.Second

// daytonaPipeDelay is how long after an async command started its input
// pipe takes to appear; input sent before gets 500 "failed to open input
// pipe", as from Daytona's daemon, whose command creates the FIFO it reads
// only once the session shell runs it.
const daytonaPipeDelay = 50 * time.Millisecond

// Messages of Daytona's daemon, word for word.
const (
	daytonaNoInputPipe = "failed to open input pipe"
	daytonaNoSession   = "session not found"
	daytonaDeadSession = "failed to execute command: bad request: failed to write command: write |1: broken pipe"
)

// daytonaReturnSuffix names the file (in the session's folder, after the
// command id) that marks that a command returned (shellText).
const daytonaReturnSuffix = ".ret"

// daytonaRequest adapts a request to the mode: a Daytona daemon knows no
// agentbox extension, so it neither advertises them nor honours a client
// that asks for them.
func (s *Server) daytonaRequest(w http.ResponseWriter, r *http.Request) {
	if !s.daytona {
		w.Header().Set(toolbox.HeaderExtensions, offeredExtensions)
		return
	}
	r.Header.Del(toolbox.HeaderUseExtensions)
}

// execSession finds the session of an exec. In the Daytona mode an unknown
// session is a 500, and so is a session whose shell died (a command ran a
// raw `exit`): its daemon fails to write the next command to the shell.
func (s *Server) execSession(id string) (*session, error) {
	ss, err := s.session(id)
	if !s.daytona {
		return ss, err
	}
	switch {
	case err != nil:
		return nil, errorf(http.StatusInternalServerError, codeInternal, "%s", daytonaNoSession)
	case ss.shellDead():
		return nil, errorf(http.StatusInternalServerError, codeInternal, "%s", daytonaDeadSession)
	}
	return ss, nil
}

// inputRefused returns the Daytona mode's answer to input that comes
// before an async command's input pipe exists: daytonaPipeDelay after the
// command started.
func (s *Server) inputRefused(c *command) error {
	if !s.daytona || !c.async {
		return nil
	}
	c.stdinMu.Lock()
	at := c.startedAt
	c.stdinMu.Unlock()
	if at.IsZero() || time.Since(at) < daytonaPipeDelay {
		return errorf(http.StatusInternalServerError, codeInternal, "%s", daytonaNoInputPipe)
	}
	return nil
}

// shellText returns what the shell runs for c. In the Daytona mode a line
// follows the command that marks, in a file, that the command returned:
// without it the shell ended on a raw `exit` (or `set -e`), which kills a
// Daytona session's shell.
func (ss *session) shellText(c *command) string {
	if !ss.srv.daytona {
		return c.text
	}
	return c.text + "\n__agentbox_r=$?; : >" + sandbox.ShellQuote(ss.returnedPath(c)) + "; exit \"$__agentbox_r\""
}

func (ss *session) returnedPath(c *command) string {
	return filepath.Join(ss.dir, c.id+daytonaReturnSuffix)
}

// diedOnExit reports, in the Daytona mode, whether c's shell ended without
// the command returning (a raw `exit N`, `set -e`), which is the end of a
// Daytona session: the session's shell is gone. The command then never
// reports an exit code: until the session is deleted its sync exec and its
// followers wait, and GET …/command/{id} shows it running.
func (ss *session) diedOnExit(c *command, code int) bool {
	if !ss.srv.daytona {
		return false
	}
	err := ss.srv.tmpFS.remove(ss.returnedPath(c))
	if !errors.Is(err, os.ErrNotExist) || code == exitNotStarted || code >= exitSignalBase {
		return false
	}
	if _, killed := c.ended(); killed {
		return false
	}
	ss.mu.Lock()
	ss.dead = true
	ss.mu.Unlock()
	return true
}

// hangDead is what a command that killed its Daytona session's shell does
// next: nothing, until the session is deleted.
func (ss *session) hangDead(c *command) {
	<-ss.killedCh
	c.finish(sandbox.ExitKilled)
}

func (ss *session) shellDead() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.dead
}

// closeTailOver reports whether a follow socket whose command ended and
// whose log was all sent may close now. In the Daytona mode it waits for
// the close tail (Options.DaytonaCloseTail) without news first; it reports false when the log
// changed (a background job printed), the session was deleted or ctx ended
// meanwhile, which the caller's wait then sees.
func (s *Server) closeTailOver(ctx context.Context, changed, killed <-chan struct{}) bool {
	if !s.daytona {
		return true
	}
	t := time.NewTimer(s.tail)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-changed:
	case <-killed:
	case <-ctx.Done():
	}
	return false
}

// daytonaOutput is a cmdLog's Daytona line discipline: NUL bytes are
// dropped, and a stream's last line gets the newline it lacks when the
// command ends (Daytona's daemon reads output line by line).
type daytonaOutput struct {
	on   bool
	open [3]bool // by stream id: the last byte written was not '\n'
}

// filter returns p without NUL bytes and notes whether stream's line is
// left open.
func (d *daytonaOutput) filter(stream byte, p []byte) []byte {
	if !d.on {
		return p
	}
	if bytes.IndexByte(p, 0) >= 0 {
		p = bytes.ReplaceAll(p, []byte{0}, nil)
	}
	if len(p) > 0 {
		d.open[stream] = p[len(p)-1] != '\n'
	}
	return p
}

// closeLines returns the streams whose last line needs a newline, and
// forgets them.
func (d *daytonaOutput) closeLines() []byte {
	var out []byte
	for s, open := range d.open {
		if open {
			out = append(out, byte(s))
			d.open[s] = false
		}
	}
	return out
}
