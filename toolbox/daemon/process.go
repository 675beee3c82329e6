package daemon

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req toolbox.CreateSessionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.createSession(req.SessionID); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		list = append(list, ss)
	}
	s.mu.Unlock()
	out := make([]toolbox.Session, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.info())
	}
	sortSessions(out)
	writeJSON(w, http.StatusOK, out)
}

func sortSessions(l []toolbox.Session) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].SessionID < l[j-1].SessionID; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	ss, err := s.session(r.PathValue("sessionId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ss.info())
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.deleteSession(r.PathValue("sessionId")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// lookup finds the session and command named in the request path.
func (s *Server) lookup(r *http.Request) (*session, *command, error) {
	ss, err := s.session(r.PathValue("sessionId"))
	if err != nil {
		return nil, nil, err
	}
	c, err := ss.command(r.PathValue("commandId"))
	if err != nil {
		return nil, nil, err
	}
	return ss, c, nil
}

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	ss, err := s.session(r.PathValue("sessionId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req toolbox.SessionExecuteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkCommand(req.Command); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := ss.start(req, uses(r, "stateless"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if c.async {
		writeJSON(w, http.StatusAccepted, toolbox.SessionExecuteResponse{CmdID: c.id})
		return
	}
	if err := c.waitDone(r.Context()); err != nil {
		return // the client went away; the command keeps running
	}
	mode := logModeOf(r)
	base64Out := uses(r, "base64")
	forms := formRaw
	if mode == modeCombined {
		forms = formCombined
	}
	if mode == modeJSON || base64Out {
		forms |= formSplit
	}
	out, err := c.log.snapshot(forms)
	if err != nil {
		s.writeError(w, r, notFound("session %q was deleted", ss.id))
		return
	}
	resp := toolbox.SessionExecuteResponse{CmdID: c.id, ExitCode: c.exit()}
	var output string
	if mode == modeCombined {
		output = string(out.combined)
	} else {
		output = string(out.raw)
	}
	resp.Output = &output
	switch {
	case base64Out:
		so, se := base64.StdEncoding.EncodeToString(out.stdout), base64.StdEncoding.EncodeToString(out.stderr)
		resp.Stdout, resp.Stderr = &so, &se
		w.Header().Set(headerEncoding, "base64")
	case mode == modeJSON:
		so, se := string(out.stdout), string(out.stderr)
		resp.Stdout, resp.Stderr = &so, &se
	}
	if !c.stateless {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	// The response carries the whole log: a stateless command's log is
	// not needed once it was sent.
	if writeJSONFlushed(w, http.StatusOK, resp) == nil {
		c.log.drop()
	}
}

func (s *Server) handleGetCommand(w http.ResponseWriter, r *http.Request) {
	_, c, err := s.lookup(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.info())
}

// inputWriteTimeout bounds a write to a command that does not read stdin.
const inputWriteTimeout = 10 * time.Second

func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) {
	_, c, err := s.lookup(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req toolbox.SessionSendInputRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	raw := uses(r, "stdin")
	closeAfter := raw && strings.EqualFold(r.Header.Get(headerStdinClose), "true")
	data := []byte(req.Data)
	if enc := strings.TrimSpace(r.Header.Get(headerStdinEncoding)); enc != "" {
		switch {
		case !raw:
			s.writeError(w, r, badRequest("%s needs the stdin extension: send %s: stdin too", headerStdinEncoding, toolbox.HeaderUseExtensions))
			return
		case !strings.EqualFold(enc, "base64"):
			s.writeError(w, r, badRequest("%s %q is not supported; the only encoding is base64", headerStdinEncoding, enc))
			return
		}
		if data, err = base64.StdEncoding.DecodeString(req.Data); err != nil {
			s.writeError(w, r, badRequest("data is not valid standard base64 (%s: base64): %v", headerStdinEncoding, err))
			return
		}
	}
	if !raw && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	if err := c.sendInput(data, closeAfter, raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sendInput writes data to c's stdin; with Daytona semantics (raw false) the
// data is echoed into the log as stdout unless the exec asked otherwise.
func (c *command) sendInput(data []byte, closeAfter, raw bool) error {
	select {
	case <-c.done:
		return errorf(http.StatusGone, codeGone, "command %q has already completed", c.id)
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
			return errorf(http.StatusGone, codeGone, "command %q has already completed", c.id)
		default:
		}
		return errorf(http.StatusGone, codeGone, "the input of command %q was closed", c.id)
	}
	if !c.started {
		// Queued behind another command: keep the input until it starts.
		if len(c.pending)+len(data) > maxPendingInput {
			return errorf(http.StatusConflict, codeConflict, "command %q has not started yet and already has %d bytes of input waiting", c.id, len(c.pending))
		}
		if !raw && !c.suppressEcho {
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
		if !raw && !c.suppressEcho {
			c.log.write(streamStdout, data)
		}
		_ = c.stdin.SetWriteDeadline(time.Now().Add(inputWriteTimeout))
		if _, err := c.stdin.Write(data); err != nil {
			select {
			case <-c.done:
				return errorf(http.StatusGone, codeGone, "command %q has already completed", c.id)
			default:
			}
			if errors.Is(err, syscall.EPIPE) {
				// Nothing reads the input any more: the command has
				// ended (its exit code may be recorded a moment later)
				// or closed its stdin. Later input fails the same way.
				c.stdin.Close()
				c.stdin = nil
				c.stdinClosed = true
				return errorf(http.StatusGone, codeGone, "command %q has already completed (nothing reads its input any more)", c.id)
			}
			return errorf(http.StatusRequestTimeout, codeRequestTimeout, "writing the input of command %q: %v (is it reading its stdin?)", c.id, err)
		}
	}
	if closeAfter {
		c.stdin.Close()
		c.stdin = nil
		c.stdinClosed = true
	}
	return nil
}

// maxPendingInput caps the input kept for a command that has not started.
const maxPendingInput = 64 << 10
