package daemon

import (
	"path/filepath"
)

// The first session's shell. A session readies a shell for its next
// command as soon as it is made (newSession), but a client makes its first
// session just before its first command, which then waits for the fork,
// exec and start-up of that shell: most of the first command's time in a
// sandbox that has just started. So the server starts one spare shell
// with itself, in the initial shell state, and the first session made
// takes it: its start-up overlaps the rest of the sandbox's boot. It is
// never replaced: later sessions ready their own shells as before, and an
// idle server keeps no more shells than its sessions need.

// spareShell is the shell started with the server for the first session.
type spareShell struct {
	token string     // the session token its marker holds
	dir   string     // the session dir it was started with
	state shellState // the shell state it was started in
	done  chan struct{}
	rs    *readyShell // set before done is closed; nil when it failed
}

// startSpare starts the spare shell in the background. Called by New,
// after anything that makes sessions of its own (the entrypoint).
func (s *Server) startSpare() {
	token := randomHex(8)
	dir := filepath.Join(s.tmpDir, token)
	if err := s.asUser(func() error { return s.tmpFS.mkdir(dir, 0o700, false) }); err != nil {
		return // the first session readies its own shell
	}
	sp := &spareShell{
		token: token,
		dir:   dir,
		state: shellState{cwd: s.workDir, env: normalizeEnv(s.environ())},
		done:  make(chan struct{}),
	}
	s.spare = sp
	s.bg.Go(func() {
		defer close(sp.done)
		stand := &session{srv: s, token: sp.token, dir: sp.dir}
		if rs, err := stand.startReadyShell(sp.state); err == nil {
			sp.rs = rs
		}
	})
}

// takeSpare returns the spare shell, once, or nil. The caller holds s.mu.
func (s *Server) takeSpare() *spareShell {
	sp := s.spare
	s.spare = nil
	return sp
}

// takeSpare returns the spare shell the session ss was made with (with
// its token and dir), once it has started, when ss is still in the state
// it was started in; otherwise, or when it was taken already, nil (a spare
// shell not used is dismissed). The caller holds the session's turn.
func (ss *session) takeSpare() *readyShell {
	ss.mu.Lock()
	sp, st := ss.spare, ss.state
	ss.spare = nil
	ss.mu.Unlock()
	if sp == nil {
		return nil
	}
	<-sp.done
	if sp.rs != nil && st.equal(sp.state) {
		return sp.rs
	}
	sp.dismiss()
	return nil
}

// dismiss ends the spare shell, once it has started, unless it is used.
func (sp *spareShell) dismiss() {
	<-sp.done
	if sp.rs != nil {
		sp.rs.dismiss()
	}
}
