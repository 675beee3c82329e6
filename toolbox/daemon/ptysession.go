package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// PTY sessions: interactive terminals (POST /process/pty and the routes
// under it, pty.go), each a shell (or a command line, ExtPtyCommand) in a
// new session of its own whose controlling terminal is a fresh
// pseudo-terminal. The server reads the terminal's output and hands it to
// the WebSocket clients connected (ptyws.go); when none is, it stops
// reading, so that output waits in the terminal (its program blocks once
// the terminal's buffer is full) instead of being lost.

// Defaults and limits of PTY sessions.
const (
	ptyDefaultCols = 80
	ptyDefaultRows = 24
	ptyDefaultTerm = "xterm-256color"
	// ptyReadChunk is the largest output message.
	ptyReadChunk = 32 << 10
	// ptyHangupWait is how long the output of a terminal whose shell
	// exited is read when processes it left behind still hold the
	// terminal: then the terminal is hung up (they get SIGHUP).
	ptyHangupWait = 500 * time.Millisecond
	// ptyKillRounds bounds the SIGKILL rounds of a delete.
	ptyKillRounds = 100
)

// ptyTable holds a server's PTY sessions. The zero value is ready.
type ptyTable struct {
	mu       sync.Mutex
	closed   bool
	sessions map[string]*ptySession
}

// ptySession is one terminal and the process on it.
type ptySession struct {
	srv     *Server
	token   string // tags its processes (markerKey)
	command string // ExtPtyCommand; "" for an interactive shell

	mu      sync.Mutex
	info    toolbox.PtySessionInfo
	master  *os.File // nil until started and after the end
	pid     int
	started bool
	killed  bool // deleted: its processes were or are being killed
	clients map[*ptyClient]struct{}
	wake    chan struct{} // closed, then replaced, when a client joins
	exited  chan struct{} // closed when the process has exited
	pumped  chan struct{} // closed when the output reader ended
	dead    chan struct{} // closed when the session is deleted
	ended   chan struct{} // closed when the output is read and exitCode set
}

// validPtyID checks the id of a new PTY session.
func validPtyID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return badRequest("id is required: name the PTY session")
	case strings.ContainsAny(id, "/\x00"), len(id) > 256:
		return badRequest("PTY session id %q is invalid: it must not contain '/' or NUL and be at most 256 bytes", id)
	}
	return nil
}

// checkPtySize checks a terminal size; zero means the default when
// allowZero.
func checkPtySize(cols, rows int, allowZero bool) error {
	low := 1
	if allowZero {
		low = 0
	}
	if cols < low || cols > toolbox.MaxPtySize || rows < low || rows > toolbox.MaxPtySize {
		return badRequest("invalid terminal size %dx%d: cols and rows must be between 1 and %d", cols, rows, toolbox.MaxPtySize)
	}
	return nil
}

// createPty registers the PTY session req describes and, unless it starts
// lazily, starts its process.
func (s *Server) createPty(req toolbox.PtyCreateRequest) error {
	if err := validPtyID(req.ID); err != nil {
		return err
	}
	if err := checkPtySize(req.Cols, req.Rows, true); err != nil {
		return err
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = s.workDir
	} else if strings.IndexByte(cwd, 0) >= 0 {
		return badRequest("cwd %q contains a NUL byte", cwd)
	} else if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(s.workDir, cwd)
	} else {
		cwd = filepath.Clean(cwd)
	}
	if err := s.checkCwd(cwd); err != nil {
		return err
	}
	envs := make(map[string]string, len(req.Envs)+1)
	for k, v := range req.Envs {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return badRequest("invalid environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k)
		}
		envs[k] = v
	}
	if envs["TERM"] == "" {
		envs["TERM"] = ptyDefaultTerm
	}
	ps := &ptySession{
		srv:     s,
		token:   "pty-" + randomHex(8),
		command: req.Command,
		info: toolbox.PtySessionInfo{
			ID: req.ID, Cwd: cwd, Envs: envs,
			Cols: cmp(req.Cols, ptyDefaultCols), Rows: cmp(req.Rows, ptyDefaultRows),
			CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			LazyStart: req.LazyStart,
		},
		clients: make(map[*ptyClient]struct{}),
		wake:    make(chan struct{}),
		exited:  make(chan struct{}),
		pumped:  make(chan struct{}),
		dead:    make(chan struct{}),
		ended:   make(chan struct{}),
	}
	t := &s.ptys
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return errClosed
	}
	if old, ok := t.sessions[req.ID]; ok && !old.hasEnded() {
		t.mu.Unlock()
		return errorf(http.StatusConflict, codeConflict, "PTY session %q already exists", req.ID)
	}
	if t.sessions == nil {
		t.sessions = make(map[string]*ptySession)
	}
	// A session whose process ended is kept for its exit code until it is
	// deleted or its id is used again.
	t.sessions[req.ID] = ps
	t.mu.Unlock()
	if req.LazyStart {
		return nil
	}
	if err := ps.start(); err != nil {
		t.mu.Lock()
		if t.sessions[req.ID] == ps {
			delete(t.sessions, req.ID)
		}
		t.mu.Unlock()
		return fmt.Errorf("starting the PTY session's shell: %w", err)
	}
	return nil
}

// cmp returns v, or def when v is zero.
func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// pty finds a PTY session.
func (s *Server) pty(id string) (*ptySession, error) {
	t := &s.ptys
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps, ok := t.sessions[id]; ok {
		return ps, nil
	}
	return nil, notFound("PTY session %q not found", id)
}

// all returns the table's sessions.
func (t *ptyTable) all() []*ptySession {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := make([]*ptySession, 0, len(t.sessions))
	for _, ps := range t.sessions {
		list = append(list, ps)
	}
	return list
}

// listPtys describes every PTY session, sorted by id.
func (s *Server) listPtys() []toolbox.PtySessionInfo {
	list := s.ptys.all()
	// An id never changes: no lock needed to read it.
	slices.SortFunc(list, func(a, b *ptySession) int { return strings.Compare(a.info.ID, b.info.ID) })
	out := make([]toolbox.PtySessionInfo, len(list))
	for i, ps := range list {
		out[i] = ps.describe()
	}
	return out
}

// deletePty removes a PTY session, killing every process it started.
func (s *Server) deletePty(id string) error {
	ps := s.ptys.take(id)
	if ps == nil {
		return notFound("PTY session %q not found", id)
	}
	ps.kill()
	return nil
}

// take removes session id from the table and returns it (nil if none).
func (t *ptyTable) take(id string) *ptySession {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.sessions[id]
	delete(t.sessions, id)
	return ps
}

// closePtys kills every PTY session for Server.Close; later creations get
// errClosed.
func (s *Server) closePtys() {
	t := &s.ptys
	t.mu.Lock()
	t.closed = true
	sessions := t.sessions
	t.sessions = nil
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, ps := range sessions {
		wg.Go(ps.kill)
	}
	wg.Wait()
}

// describe returns the session's info.
func (ps *ptySession) describe() toolbox.PtySessionInfo {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	info := ps.info
	info.Envs = make(map[string]string, len(ps.info.Envs))
	for k, v := range ps.info.Envs {
		info.Envs[k] = v
	}
	if ps.info.ExitCode != nil {
		code := *ps.info.ExitCode
		info.ExitCode = &code
	}
	return info
}

// hasEnded reports whether the session's process ended.
func (ps *ptySession) hasEnded() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.info.ExitCode != nil
}

// start starts the session's process unless it was started before.
func (ps *ptySession) start() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.started {
		return nil
	}
	if ps.killed {
		return errors.New("the PTY session was deleted")
	}
	srv := ps.srv
	master, slave, err := openPTY()
	if err != nil {
		return err
	}
	if err := setWinsize(master, ps.info.Cols, ps.info.Rows); err != nil {
		closeFiles(master, slave)
		return fmt.Errorf("setting the terminal size: %w", err)
	}
	args := []string{srv.argv0, "-i", "-l"}
	if ps.command != "" {
		args = []string{srv.argv0, "-c", ps.command}
	}
	env := withoutKeys(srv.environ(), markerKey, "PWD")
	for k, v := range ps.info.Envs {
		env = append(withoutKeys(env, k), k+"="+v)
	}
	env = append(env, "PWD="+ps.info.Cwd, markerKey+"="+ps.token)
	path := srv.shell
	if p, wrapped := defaultSignals(srv.shell, args); wrapped != nil {
		path, args = p, wrapped
	}
	cmd := &exec.Cmd{
		Path: path, Args: args, Env: env, Dir: ps.info.Cwd,
		Stdin: slave, Stdout: slave, Stderr: slave,
		// A session of its own whose controlling terminal (fd 0) is the
		// slave: job control, Ctrl-C and SIGWINCH work as in a terminal.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
	}
	err = srv.startCommand(cmd)
	slave.Close() // the child has its copies: EIO on the master once they are all closed
	if err != nil {
		master.Close()
		return err
	}
	ps.started, ps.master, ps.pid = true, master, cmd.Process.Pid
	ps.info.Active = true
	srv.bg.Go(func() { ps.wait(cmd) })
	srv.bg.Go(func() { ps.pump(master) })
	return nil
}

// defaultSignals returns the command line that runs shell with args
// (argv[0] first) with SIGINT and SIGQUIT at their default action, through env(1), when
// this process ignores them (as a process started in the background by a
// non-interactive shell does): children inherit ignored signals, and a
// shell keeps those ignored, so Ctrl-C and Ctrl-\ would do nothing in the
// terminal. It returns nil when there is nothing to do or no env(1).
func defaultSignals(shell string, args []string) (string, []string) {
	if !signal.Ignored(syscall.SIGINT) && !signal.Ignored(syscall.SIGQUIT) {
		return "", nil
	}
	env, err := exec.LookPath("env")
	if err != nil {
		return "", nil
	}
	return env, append([]string{"env", "--default-signal=INT,QUIT", "--", shell}, args[1:]...)
}

// wait reaps the process, then ends the session once its output is read.
func (ps *ptySession) wait(cmd *exec.Cmd) {
	_ = cmd.Wait()
	code := exitCodeOf(cmd.ProcessState)
	close(ps.exited)
	ps.mu.Lock()
	master := ps.master
	ps.mu.Unlock()
	// The reader ends on EIO once no process holds the terminal; processes
	// left behind get a moment, then the hangup.
	if len(findProcs([]int{ps.pid}, markerKey+"="+ps.token)) > 0 {
		t := time.AfterFunc(ptyHangupWait, func() { master.Close() })
		defer t.Stop()
	}
	<-ps.pumped
	master.Close()

	ps.mu.Lock()
	ps.info.Active = false
	ps.info.ExitCode = &code
	ps.master = nil
	clients := ps.clients
	ps.clients = map[*ptyClient]struct{}{}
	ps.mu.Unlock()
	close(ps.ended)
	for c := range clients {
		close(c.out) // the writer sends the exit close after the output
	}
}

// exitCodeOf returns a process's exit code, 128+N when signal N ended it.
func exitCodeOf(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// kill kills every process of the session and waits for its end.
func (ps *ptySession) kill() {
	ps.mu.Lock()
	if !ps.killed {
		ps.killed = true
		close(ps.dead)
	}
	started := ps.started
	ps.mu.Unlock()
	if !started {
		return
	}
	// The shell's process group id, which its jobs may still use after
	// it was reaped (the kernel does not reuse an id while a group has
	// it), and the marker find every process of the session, even one in
	// the middle of an exec, whose environment cannot be read then: two
	// scans in a row must find nothing.
	pgids := []int{ps.pid}
	marker := markerKey + "=" + ps.token
	for i, empty := 0, 0; i < ptyKillRounds && empty < 2; i++ {
		pids := findProcs(pgids, marker)
		if len(pids) == 0 {
			empty++
		} else {
			empty = 0
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(killPoll)
	}
	<-ps.ended
}

// resize sets the terminal's size (the size it starts with, when it has
// not started yet).
func (ps *ptySession) resize(cols, rows int) (toolbox.PtySessionInfo, error) {
	ps.mu.Lock()
	if ps.info.ExitCode != nil {
		code := *ps.info.ExitCode
		ps.mu.Unlock()
		return toolbox.PtySessionInfo{}, errorf(http.StatusGone, codeGone, "PTY session %q has ended with exit code %d; its terminal cannot be resized", ps.info.ID, code)
	}
	ps.info.Cols, ps.info.Rows = cols, rows
	var err error
	if ps.master != nil {
		err = setWinsize(ps.master, cols, rows)
	}
	ps.mu.Unlock()
	if err != nil {
		return toolbox.PtySessionInfo{}, fmt.Errorf("resizing the terminal: %w", err)
	}
	return ps.describe(), nil
}
