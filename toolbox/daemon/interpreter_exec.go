package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/agentbox-dev/agentbox/internal/utf8cut"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// GET /process/interpreter/execute: one execution over a WebSocket. The
// client sends one JSON message (toolbox.InterpreterExecuteRequest); the
// server answers with stdout, stderr, result and error messages as they
// come, a control message (completed, or interrupted on a timeout) and a
// close: 1000, or 4008 after a timeout.

// defaultInterpTimeout applies when an execution names no timeout.
const defaultInterpTimeout = 10 * time.Minute

// interruptEvery is how often a timed-out execution gets SIGINT again, and
// interruptTries how many it gets before its interpreter is killed (the
// context then loses its state).
const (
	interruptEvery = time.Second
	interruptTries = 5
)

func (s *Server) handleInterpreterExecute(w http.ResponseWriter, r *http.Request) error {
	// A context named in the query (our client names it there) is looked
	// up before the upgrade, so that an unknown one gets a plain 404.
	var ic *interpContext
	if id := r.URL.Query().Get("contextId"); id != "" {
		var err error
		if ic, err = s.interpContext(id); err != nil {
			return err
		}
	}
	if !isWebSocket(r) {
		return badRequest("GET /process/interpreter/execute is a WebSocket: send an Upgrade: websocket request")
	}
	if _, _, err := s.pythonFor(); err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // the toolbox authenticates with tokens, not origins
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	conn.SetReadLimit(s.maxBody)
	_, data, err := conn.Read(ctx)
	if err != nil {
		return nil
	}
	var req toolbox.InterpreterExecuteRequest
	if err := json.Unmarshal(data, &req); err != nil {
		conn.Close(toolbox.CloseInterpreterBadRequest, closeReason("bad request: the first message must be a JSON object {code, contextId?, envs?, timeout?}"))
		return nil
	}
	switch {
	case strings.TrimSpace(req.Code) == "":
		conn.Close(toolbox.CloseInterpreterBadRequest, "bad request: code is required")
		return nil
	case req.Timeout != nil && *req.Timeout < 0:
		conn.Close(toolbox.CloseInterpreterBadRequest, closeReason(fmt.Sprintf("bad request: timeout must be >= 0 seconds, got %d", *req.Timeout)))
		return nil
	}
	if ic == nil || (req.ContextID != "" && req.ContextID != ic.id) {
		if ic, err = s.interpContext(req.ContextID); err != nil {
			closeWithError(conn, err)
			return nil
		}
	}
	// From here on the client only closes (or pings).
	ctx = conn.CloseRead(ctx)
	out := &interpOut{conn: conn, ctx: ctx}
	timeout := defaultInterpTimeout
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	end := s.execute(ctx, ic, req, timeout, out)
	switch end {
	case endTimeout:
		out.send(toolbox.InterpreterMessage{Type: toolbox.InterpreterControl, Text: toolbox.ControlInterrupted})
		conn.Close(toolbox.CloseInterpreterTimeout, closeReason(fmt.Sprintf("execution timed out after %v and was interrupted; the context kept its state", timeout)))
	case endShutdown:
		conn.Close(websocket.StatusGoingAway, "server shutting down")
	default:
		out.send(toolbox.InterpreterMessage{Type: toolbox.InterpreterControl, Text: toolbox.ControlCompleted})
		conn.Close(websocket.StatusNormalClosure, "")
	}
	return nil
}

// closeWithError closes conn with the close code of err's HTTP status.
func closeWithError(conn *websocket.Conn, err error) {
	if errors.Is(err, errClosed) {
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	he := asHTTPError(err)
	code := websocket.StatusInternalError
	if he.status >= 400 && he.status < 500 {
		code = websocket.StatusCode(4000 + he.status - 400)
	}
	conn.Close(code, closeReason(category(he.status)+": "+he.Error()))
}

// closeReason cuts a close reason to the 123 bytes a close frame holds.
func closeReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	s = s[:120]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// execEnd is how an execution ended.
type execEnd int

const (
	endCompleted execEnd = iota
	endTimeout           // interrupted after its timeout
	endShutdown          // the server closes
)

// execute runs req in ic and sends what it produces to out. It returns
// once the code has ended and all its output was passed on, even when the
// client went away meanwhile (the code is then interrupted), so that the
// context is ready for the next execution.
func (s *Server) execute(ctx context.Context, ic *interpContext, req toolbox.InterpreterExecuteRequest, timeout time.Duration, out *interpOut) execEnd {
	if ic.acquire(ctx) != nil {
		return endCompleted // the client left while waiting
	}
	defer ic.release()
	python, script, err := s.pythonFor()
	var w *worker
	if err == nil {
		w, err = ic.worker(s, python, script)
	}
	if err != nil {
		if errors.Is(err, errClosed) || s.ctx.Err() != nil {
			return endShutdown
		}
		out.send(toolbox.InterpreterMessage{Type: toolbox.InterpreterError, Name: "InterpreterError", Value: asHTTPError(err).Error()})
		return endCompleted
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var tick <-chan time.Time
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	clientGone := ctx.Done()
	interrupted, timedOut, tries := false, false, 0
	interrupt := func() {
		if interrupted {
			return
		}
		interrupted = true
		w.interrupt()
		ticker = time.NewTicker(interruptEvery)
		tick = ticker.C
	}
	events := w.events
	var pending []toolbox.InterpreterMessage
	var done bool
	var ends, eofs [3]bool
	if w.send(map[string]any{"code": req.Code, "envs": req.Envs}) != nil {
		done = true // the worker is gone: collect what it left
	}
	for !(done && ends[1] && ends[2]) {
		if events == nil && eofs[1] && eofs[2] {
			break // the worker exited
		}
		select {
		case c := <-w.chunks:
			switch {
			case c.eof:
				eofs[c.stream], ends[c.stream] = true, true
				out.flush(c.stream)
			case c.end:
				ends[c.stream] = true
				out.flush(c.stream)
			default:
				out.output(c.stream, c.data)
			}
		case m, ok := <-events:
			switch {
			case !ok:
				events = nil
				done = true
			case m.Type == "done":
				done = true
			case m.Type == toolbox.InterpreterError && interrupted && m.Name == "KeyboardInterrupt":
				// Our interruption, not the code's error.
			case m.Type == toolbox.InterpreterError || m.Type == toolbox.InterpreterResult:
				// Sent once the output written before it has been:
				// the output comes through other pipes.
				pending = append(pending, m)
			}
		case <-timer:
			timedOut = true
			interrupt()
		case <-clientGone:
			clientGone = nil
			interrupt()
		case <-tick:
			if tries++; tries < interruptTries {
				w.interrupt()
			} else {
				// The code ignores KeyboardInterrupt: end it, and the
				// context's state with it.
				tick = nil
				s.bg.Go(func() { killTree([]int{w.cmd.Process.Pid}, w.token) })
			}
		case <-w.gone:
			if s.ctx.Err() != nil {
				return endShutdown
			}
			out.send(toolbox.InterpreterMessage{Type: toolbox.InterpreterError, Name: "ContextDeleted",
				Value: fmt.Sprintf("interpreter context %q was deleted while the code ran", ic.id)})
			return endCompleted
		}
	}
	for _, m := range pending {
		out.send(m)
	}
	if events == nil {
		select {
		case <-w.exited:
		case <-time.After(destroyWait):
		}
		out.send(toolbox.InterpreterMessage{Type: toolbox.InterpreterError, Name: "InterpreterExited",
			Value: fmt.Sprintf("%v (exit status %d): the context's variables are lost; the next execution starts a new interpreter", errWorkerExited, w.status)})
	}
	if timedOut {
		return endTimeout
	}
	return endCompleted
}

// interpOut sends an execution's messages to its WebSocket, keeping each
// stream's incomplete UTF-8 sequence for the next piece. Once a write
// fails (the client left) it sends nothing more.
type interpOut struct {
	conn  *websocket.Conn
	ctx   context.Context
	dead  bool
	carry [3][]byte
}

// streamType is the message type of output of stream (1 stdout, 2
// stderr).
func streamType(stream int) string {
	if stream == 2 {
		return toolbox.InterpreterStderr
	}
	return toolbox.InterpreterStdout
}

func (o *interpOut) send(m toolbox.InterpreterMessage) {
	if o.dead {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return
	}
	if o.conn.Write(o.ctx, websocket.MessageText, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) != nil {
		o.dead = true
	}
}

// output sends data of stream, up to its last complete UTF-8 sequence.
func (o *interpOut) output(stream int, data []byte) {
	if len(o.carry[stream]) > 0 {
		data = append(o.carry[stream], data...)
		o.carry[stream] = nil
	}
	n := utf8cut.Complete(data)
	if n < len(data) {
		o.carry[stream] = append([]byte(nil), data[n:]...)
	}
	if n > 0 {
		o.send(toolbox.InterpreterMessage{Type: streamType(stream), Text: string(data[:n])})
	}
}

// flush sends what stream held back (bytes that are not UTF-8 become
// U+FFFD).
func (o *interpOut) flush(stream int) {
	if c := o.carry[stream]; len(c) > 0 {
		o.carry[stream] = nil
		o.send(toolbox.InterpreterMessage{Type: streamType(stream), Text: string(c)})
	}
}
