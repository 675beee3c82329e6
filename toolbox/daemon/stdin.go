package daemon

import (
	"errors"
	"net/http"
	"os"
	"syscall"
	"time"
)

// inputWriteTimeout bounds a write to a command that does not read stdin.
const inputWriteTimeout = 10 * time.Second

// maxPendingInput caps the input kept for a command that has not started.
const maxPendingInput = 64 << 10

// closeStdin closes the write end of an async command's stdin.
func (c *command) closeStdin() {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.closeStdinLocked()
	c.pending = nil
}

// closeStdinLocked closes c's stdin for good. c.stdinMu must be held.
func (c *command) closeStdinLocked() {
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
	}
	c.stdinClosed = true
}

// attachStdin hands an async command the write end of its stdin and
// flushes the input that arrived while it was queued.
func (c *command) attachStdin(w *os.File) {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.started, c.startedAt = true, time.Now()
	if len(c.pending) > 0 {
		_ = w.SetWriteDeadline(time.Now().Add(inputWriteTimeout))
		_, _ = w.Write(c.pending)
		c.pending = nil
	}
	if c.stdinClosed {
		w.Close()
		return
	}
	c.stdin = w
}

// errCompleted is the answer to input for a command that has ended.
func (c *command) errCompleted() error {
	return errorf(http.StatusGone, codeGone, "command %q has already completed", c.id)
}

// sendInput writes data to c's stdin; with Daytona semantics (raw false) the
// data is echoed into the log as stdout unless the exec asked otherwise.
func (c *command) sendInput(data []byte, closeAfter, raw bool) error {
	select {
	case <-c.done:
		return c.errCompleted()
	default:
	}
	if !c.async {
		return badRequest("command %q was run synchronously and reads no input; run it with runAsync to send input", c.id)
	}
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinClosed {
		select {
		case <-c.done:
			return c.errCompleted()
		default:
		}
		return errorf(http.StatusGone, codeGone, "the input of command %q was closed", c.id)
	}
	echo := !raw && !c.suppressEcho
	if !c.started {
		// Queued behind another command: keep the input until it starts.
		if len(c.pending)+len(data) > maxPendingInput {
			return errorf(http.StatusConflict, codeConflict, "command %q has not started yet and already has %d bytes of input waiting", c.id, len(c.pending))
		}
		if echo {
			c.log.write(streamStdout, data)
		}
		c.pending = append(c.pending, data...)
		if closeAfter {
			c.stdinClosed = true
		}
		return nil
	}
	if len(data) > 0 {
		// Echo first, so the echo precedes whatever the command answers.
		if echo {
			c.log.write(streamStdout, data)
		}
		_ = c.stdin.SetWriteDeadline(time.Now().Add(inputWriteTimeout))
		if _, err := c.stdin.Write(data); err != nil {
			select {
			case <-c.done:
				return c.errCompleted()
			default:
			}
			if errors.Is(err, syscall.EPIPE) {
				// Nothing reads the input any more: the command has
				// ended (its exit code may be recorded a moment later)
				// or closed its stdin. Later input fails the same way.
				c.closeStdinLocked()
				return errorf(http.StatusGone, codeGone, "command %q has already completed (nothing reads its input any more)", c.id)
			}
			return errorf(http.StatusRequestTimeout, codeRequestTimeout, "writing the input of command %q: %v (is it reading its stdin?)", c.id, err)
		}
	}
	if closeAfter {
		c.closeStdinLocked()
	}
	return nil
}
