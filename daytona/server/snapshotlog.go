package server

import (
	"net/http"
	"sync"
	"time"
)

// The build logs of snapshots: served to clients, and recorded as they
// grow (snapshotstore.go).

func (s *Server) getSnapshotBuildLogsURL(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, toolboxProxyURL{URL: s.baseURL(r) + "/api/snapshots/" + v.id() + "/build-logs"})
	return nil
}

func (s *Server) getSnapshotBuildLogs(w http.ResponseWriter, r *http.Request) error {
	v, err := s.findSnapshot(r.Context(), orgOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	if v.rec == nil || v.rec.log == nil {
		return errorf(http.StatusNotFound, "Snapshot %s has no build logs: agentbox serve did not build it", v.name)
	}
	return serveBuildLog(w, r, v.rec.log)
}

// recordedLog is the build log of a snapshot being built, written to the
// snapshot's record as it grows (at most once per recordLogEvery), so
// that a build the server's end cuts short keeps its log so far.
type recordedLog struct {
	s     *Server
	rec   *snapshotRecord
	mu    sync.Mutex
	saved time.Time // guarded by mu
}

// recordLogEvery is how often a build log being written is recorded.
const recordLogEvery = time.Second

func (l *recordedLog) Write(p []byte) (int, error) {
	n, err := l.rec.log.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.saved) >= recordLogEvery {
		l.saved = now
		l.s.snapshots.mu.Lock()
		l.s.saveSnapshot(l.rec)
		l.s.snapshots.mu.Unlock()
	}
	return n, err
}
