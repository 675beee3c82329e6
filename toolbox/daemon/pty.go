package daemon

import (
	"net/http"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// The handlers of /process/pty: PTY sessions (ptysession.go) and their
// WebSocket (ptyws.go).

// ptyRoutes serves /process/pty.
func (s *Server) ptyRoutes() []route {
	return []route{
		{"POST /process/pty", s.handleCreatePty},
		{"GET /process/pty", s.handleListPtys},
		{"GET /process/pty/{sessionId}", s.handleGetPty},
		{"DELETE /process/pty/{sessionId}", s.handleDeletePty},
		{"POST /process/pty/{sessionId}/resize", s.handleResizePty},
		{"GET /process/pty/{sessionId}/connect", s.handlePtyConnect},
		{"GET /process/pty/create-connect", s.handlePtyCreateConnect},
	}
}

func (s *Server) handleCreatePty(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.PtyCreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := s.createPty(req); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toolbox.PtyCreateResponse{SessionID: req.ID})
	return nil
}

func (s *Server) handleListPtys(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, toolbox.PtyListResponse{Sessions: s.listPtys()})
	return nil
}

func (s *Server) handleGetPty(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.pty(r.PathValue("sessionId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ps.describe())
	return nil
}

func (s *Server) handleDeletePty(w http.ResponseWriter, r *http.Request) error {
	if err := s.deletePty(r.PathValue("sessionId")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "PTY session deleted"})
	return nil
}

func (s *Server) handleResizePty(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.pty(r.PathValue("sessionId"))
	if err != nil {
		return err
	}
	var req toolbox.PtyResizeRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkPtySize(req.Cols, req.Rows, false); err != nil {
		return err
	}
	info, err := ps.resize(req.Cols, req.Rows)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}
