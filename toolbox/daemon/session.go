package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// reservedSession is the id Daytona keeps for the image entrypoint.
const reservedSession = "entrypoint"

// destroyWait bounds how long deleting a session waits for each killed
// command to end.
const destroyWait = 5 * time.Second

// session is a Daytona session: a saved shell state and the commands run in
// it, one at a time (see run.go), each in a ready shell (readyshell.go).
type session struct {
	srv   *Server
	id    string
	token string // unique per session; tags its processes
	dir   string // logs and state files

	turn chan struct{} // one token: the right to run a command

	mu       sync.Mutex
	state    shellState // what the next command starts with
	cmds     map[string]*command
	order    []*command
	deleted  bool
	dead     bool          // Daytona mode: a command killed the shell (daytona.go)
	ready    *readyShell   // shell ready for the next command, or nil
	spare    *spareShell   // the server's spare shell, until the first command or the session's readying takes it
	killedCh chan struct{} // closed when the session is deleted
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// validID checks a session id taken from a request body.
func validID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return badRequest("sessionId is required")
	case id == reservedSession:
		return badRequest("session id %q is reserved for the image entrypoint; choose another", id)
	case strings.ContainsAny(id, "/\x00"), len(id) > 256:
		return badRequest("session id %q is invalid: it must not contain '/' or NUL and be at most 256 bytes", id)
	}
	return nil
}

func (s *Server) createSession(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if _, ok := s.sessions[id]; ok {
		return errorf(http.StatusConflict, codeConflict, "session %q already exists", id)
	}
	ss, err := s.newSession(id)
	if err != nil {
		return err
	}
	s.sessions[id] = ss
	return nil
}

// newSession makes a session, not registered, with a shell being readied
// for its first command (the spare shell, for the first session made).
// The caller holds s.mu (or is New, before anything else runs).
func (s *Server) newSession(id string) (*session, error) {
	token, dir, spare := "", "", s.takeSpare()
	if spare != nil {
		token, dir = spare.token, spare.dir
	} else {
		token = randomHex(8)
		dir = filepath.Join(s.tmpDir, token)
		if err := s.asUser(func() error { return s.tmpFS.mkdir(dir, 0o700, false) }); err != nil {
			return nil, fmt.Errorf("creating the session dir: %w", err)
		}
	}
	ss := &session{
		srv:      s,
		id:       id,
		token:    token,
		dir:      dir,
		turn:     make(chan struct{}, 1),
		state:    shellState{cwd: s.workDir, env: normalizeEnv(s.environ())},
		cmds:     make(map[string]*command),
		killedCh: make(chan struct{}),
		spare:    spare,
	}
	ss.turn <- struct{}{}
	// Have a shell ready for the first command: the spare shell, or one
	// of its own. Whichever comes first, this or the first command, takes
	// the spare shell (both hold the turn).
	s.bg.Go(func() {
		select {
		case <-ss.turn:
		case <-ss.killedCh:
			return // destroy dismissed the spare shell
		}
		if rs := ss.takeSpare(); rs != nil {
			ss.keepReadyShell(rs)
		} else {
			ss.prepareReadyShell()
		}
		ss.turn <- struct{}{}
	})
	return ss, nil
}

func (s *Server) session(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		return ss, nil
	}
	return nil, notFound("session %q not found", id)
}

// sessionCommand finds command cid of session sid.
func (s *Server) sessionCommand(sid, cid string) (*session, *command, error) {
	ss, err := s.session(sid)
	if err != nil {
		return nil, nil, err
	}
	c, err := ss.command(cid)
	if err != nil {
		return nil, nil, err
	}
	return ss, c, nil
}

// listSessions describes every session, sorted by id.
func (s *Server) listSessions() []toolbox.Session {
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
	slices.SortFunc(out, func(a, b toolbox.Session) int { return strings.Compare(a.SessionID, b.SessionID) })
	return out
}

func (s *Server) deleteSession(id string) error {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	if ok {
		delete(s.sessions, id)
	}
	s.mu.Unlock()
	if !ok {
		return notFound("session %q not found", id)
	}
	ss.destroy()
	return nil
}

func (ss *session) command(id string) (*command, error) {
	ss.mu.Lock()
	c := ss.cmds[id]
	ss.mu.Unlock()
	if c == nil {
		return nil, notFound("command %q not found in session %q", id, ss.id)
	}
	return c, nil
}

// info describes the session for the API.
func (ss *session) info() toolbox.Session {
	ss.mu.Lock()
	cmds := append([]*command(nil), ss.order...)
	ss.mu.Unlock()
	out := toolbox.Session{SessionID: ss.id, Commands: make([]toolbox.Command, 0, len(cmds))}
	for _, c := range cmds {
		out.Commands = append(out.Commands, c.info())
	}
	return out
}

// destroy kills every process the session started, ends its followers and
// removes its logs.
func (ss *session) destroy() {
	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		return
	}
	ss.deleted = true
	close(ss.killedCh)
	cmds := append([]*command(nil), ss.order...)
	rs := ss.ready
	ss.ready = nil
	spare := ss.spare
	ss.spare = nil
	ss.mu.Unlock()
	if rs != nil {
		rs.dismiss()
	}
	if spare != nil {
		spare.dismiss()
	}

	var pgids []int
	for _, c := range cmds {
		if pg := c.markKilled(); pg > 0 {
			pgids = append(pgids, pg)
		}
	}
	killTree(pgids, ss.token+":")
	for _, c := range cmds {
		c.closeStdin()
		select {
		case <-c.done:
		case <-time.After(destroyWait):
			if ss.srv.log != nil {
				ss.srv.log.Error("session command did not end after kill", "session", ss.id, "command", c.id)
			}
		}
		c.closePipes()
		c.log.close()
	}
	ss.srv.tmpFS.removeAll(ss.dir)
}
