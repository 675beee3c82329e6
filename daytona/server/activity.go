package server

import (
	"fmt"
	"net/http"
)

// updateLastActivity is UpdateLastActivity, the optional body of POST
// /sandbox/{id}/last-activity.
type updateLastActivity struct {
	ActivityType string `json:"activityType"`
}

// updateLastActivity answers POST /sandbox/{id}/last-activity: the
// sandbox was used now, which restarts its idle timers (auto-stop,
// auto-pause). It does not resume a paused sandbox. 201 without a body,
// as Daytona.
func (s *Server) updateLastActivity(w http.ResponseWriter, r *http.Request) error {
	var req updateLastActivity
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	_, write, err := s.callLocked(r, func(_ *http.Request, rec *record) (any, error) {
		now := s.now()
		rec.lastActivity = now
		rec.touch(now)
		return struct{}{}, nil
	})
	if err != nil {
		return err
	}
	if err := write.wait(); err != nil {
		return fmt.Errorf("agentbox serve: recording sandbox %s: %w", r.PathValue("id"), err)
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}
