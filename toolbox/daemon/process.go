package daemon

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The handlers of /process: one-shot execution, sessions, their commands,
// input.

// processRoutes serves /process.
func (s *Server) processRoutes() []route {
	return []route{
		{"POST /process/execute", s.handleExecute},
		{"POST /process/session", s.handleCreateSession},
		{"GET /process/session", s.handleListSessions},
		{"GET /process/session/{sessionId}", s.handleGetSession},
		{"DELETE /process/session/{sessionId}", s.handleDeleteSession},
		{"POST /process/session/{sessionId}/exec", s.handleSessionExec},
		{"GET /process/session/{sessionId}/command/{commandId}", s.handleGetCommand},
		{"POST /process/session/{sessionId}/command/{commandId}/input", s.handleInput},
		{"GET /process/session/{sessionId}/command/{commandId}/logs", s.handleLogs},
	}
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.CreateSessionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := s.createSession(req.SessionID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.listSessions())
	return nil
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.session(r.PathValue("sessionId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ss.info())
	return nil
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) error {
	if err := s.deleteSession(r.PathValue("sessionId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lookup finds the session and command named in the request path.
func (s *Server) lookup(r *http.Request) (*session, *command, error) {
	return s.sessionCommand(r.PathValue("sessionId"), r.PathValue("commandId"))
}

// errSessionDeleted answers for a command whose log went with its session.
func errSessionDeleted(ss *session) error {
	return notFound("session %q was deleted", ss.id)
}

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.execSession(r.PathValue("sessionId"))
	if err != nil {
		return err
	}
	var req toolbox.SessionExecuteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkCommand(req.Command); err != nil {
		return err
	}
	async := req.RunAsync || req.Async
	binaryOut := !async && uses(r, toolbox.ExtBinary)
	tail := int64(-1)
	if binaryOut {
		if tail, err = tailOf(r); err != nil {
			return err
		}
	}
	c, err := ss.start(req, uses(r, toolbox.ExtStateless), uses(r, toolbox.ExtTether))
	if err != nil {
		return err
	}
	if c.async {
		writeJSON(w, http.StatusAccepted, toolbox.SessionExecuteResponse{CmdID: c.id})
		return nil
	}
	if err := c.waitDone(r.Context()); err != nil {
		// The client went away: a tethered command dies with it, others
		// run on (Daytona's way).
		if c.tether != nil {
			c.abandon()
		}
		return nil
	}
	if _, killed := c.ended(); killed {
		// The session was deleted (or the server closed) while the
		// command ran: its log went with it.
		return errSessionDeleted(ss)
	}
	if binaryOut {
		complete, err := writeBinaryResult(w, c, tail)
		if errors.Is(err, errLogClosed) {
			return errSessionDeleted(ss)
		} else if err != nil {
			return err
		}
		if complete && c.stateless {
			c.log.drop()
		}
		return nil
	}
	mode := logModeOf(r)
	base64Out := uses(r, toolbox.ExtBase64)
	forms := formRaw
	if mode == modeCombined {
		forms = formCombined
	}
	if mode == modeJSON || base64Out {
		forms |= formSplit
	}
	out, err := c.log.snapshot(forms)
	if err != nil {
		return errSessionDeleted(ss)
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
		w.Header().Set(toolbox.HeaderEncoding, toolbox.EncodingBase64)
	case mode == modeJSON:
		so, se := string(out.stdout), string(out.stderr)
		resp.Stdout, resp.Stderr = &so, &se
	}
	if !c.stateless {
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	// The response carries the whole log: a stateless command's log is
	// not needed once it was sent.
	if writeJSONFlushed(w, http.StatusOK, resp) == nil {
		c.log.drop()
	}
	return nil
}

func (s *Server) handleGetCommand(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.lookup(r)
	if err != nil {
		return err
	}
	c.tether.touch()
	writeJSON(w, http.StatusOK, c.info())
	return nil
}

func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.lookup(r)
	if err != nil {
		return err
	}
	c.tether.touch()
	var req toolbox.SessionSendInputRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	raw := uses(r, toolbox.ExtStdin)
	closeAfter := raw && strings.EqualFold(r.Header.Get(toolbox.HeaderStdinClose), "true")
	data := []byte(req.Data)
	if enc := strings.TrimSpace(r.Header.Get(toolbox.HeaderStdinEncoding)); enc != "" {
		switch {
		case !raw:
			return badRequest("%s needs the stdin extension: send %s: %s too", toolbox.HeaderStdinEncoding, toolbox.HeaderUseExtensions, toolbox.ExtStdin)
		case !strings.EqualFold(enc, toolbox.EncodingBase64):
			return badRequest("%s %q is not supported; the only encoding is %s", toolbox.HeaderStdinEncoding, enc, toolbox.EncodingBase64)
		}
		if data, err = base64.StdEncoding.DecodeString(req.Data); err != nil {
			return badRequest("data is not valid standard base64 (%s: %s): %v", toolbox.HeaderStdinEncoding, toolbox.EncodingBase64, err)
		}
	}
	if !raw && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	if err := s.inputRefused(c); err != nil {
		return err
	}
	if err := c.sendInput(data, closeAfter, raw); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
