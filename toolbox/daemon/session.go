package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/toolbox"
)

var (
	stdoutMarker = []byte{0x01, 0x01, 0x01}
	stderrMarker = []byte{0x02, 0x02, 0x02}
)

// reservedSession is the id Daytona keeps for the image entrypoint.
const reservedSession = "entrypoint"

// readChunk is the largest read from a command's output pipe.
const readChunk = 256 << 10

// growPipe enlarges a pipe's buffer so that fast writers block less and
// reads come in bigger chunks. Failure is harmless.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
		})
	}
}

// drainGrace is how long a finished command's output pipes are read before
// the command counts as ended, when background children keep them open.
const drainGrace = 20 * time.Millisecond

// maxInlineScript is the largest script passed with -c; longer ones go
// through a file (the kernel caps one argument at 128 KiB).
const maxInlineScript = 96 << 10

// session is a Daytona session: a saved shell state (exported environment
// and working directory) and the commands run in it, one at a time.
type session struct {
	srv   *Server
	id    string
	token string // unique per session; tags its processes
	dir   string // logs and state files

	turn chan struct{} // one token: the right to run a command

	mu       sync.Mutex
	env      []string
	cwd      string
	cmds     map[string]*command
	order    []*command
	deleted  bool
	spare    *spare        // shell ready for the next command, or nil
	killedCh chan struct{} // closed when the session is deleted
}

// command is one session command.
type command struct {
	sess         *session
	id           string
	text         string
	async        bool
	suppressEcho bool
	log          *cmdLog

	// stdin of an async command: the write end, nil when closed, not yet
	// started, or sync. Input sent while the command is queued waits in
	// pending.
	stdinMu     sync.Mutex
	stdin       *os.File
	started     bool
	stdinClosed bool
	pending     []byte

	mu       sync.Mutex
	exitCode *int
	killed   bool       // ended because the session was deleted
	pgid     int        // process group, 0 until started
	pipes    []*os.File // read ends of stdout and stderr
	done     chan struct{}
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
		return errorf(503, codeInternal, "the toolbox server is shutting down")
	}
	if _, ok := s.sessions[id]; ok {
		return errorf(409, codeConflict, "session %q already exists", id)
	}
	token := randomHex(8)
	dir := filepath.Join(s.tmpDir, token)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating the session dir: %w", err)
	}
	ss := &session{
		srv:      s,
		id:       id,
		token:    token,
		dir:      dir,
		turn:     make(chan struct{}, 1),
		env:      normalizeEnv(s.baseEnv),
		cwd:      s.workDir,
		cmds:     make(map[string]*command),
		killedCh: make(chan struct{}),
	}
	ss.turn <- struct{}{}
	s.sessions[id] = ss
	// Have a shell ready for the first command.
	s.goTracked(func() {
		select {
		case <-ss.turn:
		case <-ss.killedCh:
			return
		}
		ss.prepare()
		ss.turn <- struct{}{}
	})
	return nil
}

func (s *Server) session(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		return ss, nil
	}
	return nil, notFound("session %q not found", id)
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
	defer ss.mu.Unlock()
	if c, ok := ss.cmds[id]; ok {
		return c, nil
	}
	return nil, notFound("command %q not found in session %q", id, ss.id)
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

func (c *command) info() toolbox.Command {
	return toolbox.Command{ID: c.id, Command: c.text, ExitCode: c.exit()}
}

// exit returns the exit code, nil while the command runs.
func (c *command) exit() *int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitCode == nil {
		return nil
	}
	v := *c.exitCode
	return &v
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
	sp := ss.spare
	ss.spare = nil
	ss.mu.Unlock()
	if sp != nil {
		sp.dismiss()
	}

	var pgids []int
	for _, c := range cmds {
		c.mu.Lock()
		if c.exitCode == nil {
			c.killed = true
		}
		if c.pgid > 0 && c.exitCode == nil {
			pgids = append(pgids, c.pgid)
		}
		c.mu.Unlock()
	}
	killTree(pgids, ss.token+":")
	for _, c := range cmds {
		c.closeStdin()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			if ss.srv.log != nil {
				ss.srv.log.Error("session command did not end after kill", "session", ss.id, "command", c.id)
			}
		}
		c.mu.Lock()
		pipes := c.pipes
		c.pipes = nil
		c.mu.Unlock()
		for _, p := range pipes {
			p.Close()
		}
		c.log.close()
	}
	os.RemoveAll(ss.dir)
}

// start registers a command and runs it in the session's turn. It returns
// at once; c.done is closed when the command has ended.
func (ss *session) start(req toolbox.SessionExecuteRequest) (*command, error) {
	c := &command{
		sess:         ss,
		id:           newUUID(),
		text:         req.Command,
		async:        req.RunAsync || req.Async,
		suppressEcho: req.SuppressInputEcho,
		done:         make(chan struct{}),
	}
	c.log = newCmdLog(filepath.Join(ss.dir, c.id+".log"), &ss.srv.logMem)
	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		return nil, notFound("session %q not found", ss.id)
	}
	ss.cmds[c.id] = c
	ss.order = append(ss.order, c)
	ss.mu.Unlock()
	ss.srv.goTracked(func() { ss.run(c) })
	return c, nil
}

// finish records the exit code and wakes everyone waiting for c.
func (c *command) finish(code int) {
	c.closeStdin()
	c.mu.Lock()
	if c.killed && code >= 0 && code < 128 {
		// The session was deleted before the command ended on its own.
		code = 137
	}
	c.exitCode = &code
	c.mu.Unlock()
	c.log.finish()
	close(c.done)
}

// closeStdin closes the write end of an async command's stdin.
func (c *command) closeStdin() {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
	}
	c.pending = nil
	c.stdinClosed = true
}

// attachStdin hands an async command the write end of its stdin and
// flushes the input that arrived while it was queued.
func (c *command) attachStdin(w *os.File) {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.started = true
	if c.stdinClosed {
		if len(c.pending) > 0 {
			_ = w.SetWriteDeadline(time.Now().Add(inputWriteTimeout))
			_, _ = w.Write(c.pending)
		}
		c.pending = nil
		w.Close()
		return
	}
	c.stdin = w
	if len(c.pending) > 0 {
		_ = w.SetWriteDeadline(time.Now().Add(inputWriteTimeout))
		_, _ = w.Write(c.pending)
		c.pending = nil
	}
}

// spare is a shell started ahead of time in a session's state. It waits
// on a pipe for the signal to run the next command, so that the fork, exec
// and shell start-up of a command overlap the idle time between commands.
type spare struct {
	cmd    *exec.Cmd
	id     string   // marker id
	goW    *os.File // fd 3: the command goes here; close to dismiss
	stateR *os.File // fd 4: the EXIT trap writes the shell state here
	stdinW *os.File
	outR   *os.File
	errR   *os.File
	script string // file the command text goes to for non-bash shells
}

// spawn starts a spare shell with env in cwd.
func (ss *session) spawn(env []string, cwd string) (*spare, error) {
	srv := ss.srv
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		cwd = srv.workDir
	}
	sp := &spare{id: randomHex(8)}
	sp.script = filepath.Join(ss.dir, sp.id+".sh")
	env = append(withoutKeys(env, "PWD", markerKey), "PWD="+cwd, markerKey+"="+ss.token+":"+sp.id)

	var files []*os.File // child ends, closed after Start
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		closeAll(goR, goW)
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(goR, goW, stdinR, stdinW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(goR, goW, stdinR, stdinW, outR, outW)
		return nil, err
	}
	stateR, stateW, err := os.Pipe()
	if err != nil {
		closeAll(goR, goW, stdinR, stdinW, outR, outW, errR, errW)
		return nil, err
	}
	growPipe(outW)
	growPipe(errW)
	files = []*os.File{goR, stdinR, outW, errW, stateW}
	sp.cmd = &exec.Cmd{
		Path:        srv.shell,
		Args:        []string{srv.shell, "-c", spareScript(srv.bash, sp.script)},
		Env:         env,
		Dir:         cwd,
		Stdin:       stdinR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{goR, stateW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = sp.cmd.Start()
	closeAll(files...)
	if err != nil {
		closeAll(goW, stdinW, outR, errR, stateR)
		return nil, err
	}
	sp.goW, sp.stdinW, sp.outR, sp.errR, sp.stateR = goW, stdinW, outR, errR, stateR
	return sp, nil
}

// dismiss ends an unused spare.
func (sp *spare) dismiss() {
	sp.goW.Close() // the shell sees EOF and exits quietly
	sp.stdinW.Close()
	t := time.AfterFunc(time.Second, func() { _ = syscall.Kill(-sp.cmd.Process.Pid, syscall.SIGKILL) })
	_ = sp.cmd.Wait()
	t.Stop()
	sp.outR.Close()
	sp.errR.Close()
	sp.stateR.Close()
}

// prepare starts the session's next spare shell unless the session is gone.
// The caller holds the session's turn.
func (ss *session) prepare() {
	ss.mu.Lock()
	if ss.deleted || ss.spare != nil {
		ss.mu.Unlock()
		return
	}
	env := append([]string(nil), ss.env...)
	cwd := ss.cwd
	ss.mu.Unlock()
	sp, err := ss.spawn(env, cwd)
	if err != nil {
		return // the next command starts its own shell and reports the error
	}
	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		sp.dismiss()
		return
	}
	ss.spare = sp
	ss.mu.Unlock()
}

// run waits for the session's turn and runs c.
func (ss *session) run(c *command) {
	select {
	case <-ss.turn:
	case <-ss.killedCh:
		c.finish(137)
		return
	}
	defer func() { ss.turn <- struct{}{} }()

	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		c.finish(137)
		return
	}
	sp := ss.spare
	ss.spare = nil
	env := append([]string(nil), ss.env...)
	cwd := ss.cwd
	ss.mu.Unlock()

	if sp == nil {
		var err error
		if sp, err = ss.spawn(env, cwd); err != nil {
			msg := fmt.Sprintf("agentbox: cannot start the command: %v\n", err)
			c.log.write(streamStderr, []byte(msg))
			c.finish(-1)
			return
		}
	}
	// Most commands leave env and cwd alone: start the next shell now, in
	// the current state, and keep it if the state did not change.
	next := make(chan *spare, 1)
	ss.srv.goTracked(func() {
		n, err := ss.spawn(env, cwd)
		if err != nil {
			n = nil
		}
		next <- n
	})
	code, state := ss.exec(c, sp)
	if state != nil {
		ss.mu.Lock()
		ss.cwd, ss.env = state.cwd, state.env
		ss.mu.Unlock()
	}
	c.finish(code)
	n := <-next
	if n != nil && state != nil && (state.cwd != cwd || !slices.Equal(state.env, env)) {
		n.dismiss()
		n = nil
	}
	if n == nil {
		ss.prepare()
		return
	}
	ss.mu.Lock()
	if ss.deleted || ss.spare != nil {
		ss.mu.Unlock()
		n.dismiss()
		return
	}
	ss.spare = n
	ss.mu.Unlock()
}

// shellState is what a command's EXIT trap reports.
type shellState struct {
	cwd string
	env []string
}

// exec runs c in the spare shell sp to its end and returns its exit code
// and the shell state it left behind (nil when it reported none).
func (ss *session) exec(c *command, sp *spare) (int, *shellState) {
	srv := ss.srv
	if !srv.bash {
		defer os.Remove(sp.script)
		if err := os.WriteFile(sp.script, []byte(c.text), 0o600); err != nil {
			sp.dismiss()
			c.log.write(streamStderr, []byte(fmt.Sprintf("agentbox: cannot start the command: %v\n", err)))
			return -1, nil
		}
	}
	c.mu.Lock()
	killed := c.killed
	if !killed {
		c.pgid = sp.cmd.Process.Pid
		c.pipes = []*os.File{sp.outR, sp.errR}
	}
	c.mu.Unlock()
	if killed {
		sp.dismiss()
		return 137, nil
	}
	if c.async {
		c.attachStdin(sp.stdinW)
	} else {
		sp.stdinW.Close() // synchronous commands read EOF
	}

	var readers sync.WaitGroup
	readers.Add(2)
	pump := func(f *os.File, stream byte) {
		defer readers.Done()
		buf := make([]byte, readChunk)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				c.log.write(stream, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	srv.goTracked(func() { pump(sp.outR, streamStdout) })
	srv.goTracked(func() { pump(sp.errR, streamStderr) })

	stateCh := make(chan *shellState, 1)
	srv.goTracked(func() { stateCh <- readState(sp.stateR, srv.bash) })

	// Under bash the command itself goes through the pipe, length first.
	msg := "\n"
	if srv.bash {
		msg = strconv.Itoa(len(c.text)) + "\n" + c.text
	}
	_, _ = sp.goW.Write([]byte(msg))
	sp.goW.Close()
	werr := sp.cmd.Wait()
	code := exitCode(sp.cmd, werr)

	// The EXIT trap wrote the state before the shell exited, unless the
	// shell was killed; children may hold the pipe, so do not wait for EOF.
	var state *shellState
	t := time.NewTimer(drainGrace)
	select {
	case state = <-stateCh:
	case <-t.C:
		sp.stateR.Close()
		<-stateCh
	}
	t.Stop()
	sp.stateR.Close()

	// Output written before the shell exited is already in the pipes; give
	// the readers a moment to reach EOF. Background children may hold the
	// pipes open: their later output is still logged.
	drained := make(chan struct{})
	srv.goTracked(func() {
		readers.Wait()
		close(drained)
		c.mu.Lock()
		pipes := c.pipes
		c.pipes = nil
		c.mu.Unlock()
		for _, p := range pipes {
			p.Close()
		}
	})
	t = time.NewTimer(drainGrace)
	select {
	case <-drained:
	case <-t.C:
	}
	t.Stop()
	return code, state
}

// exitCode maps a finished command to a shell-style exit code.
func exitCode(cmd *exec.Cmd, err error) int {
	ps := cmd.ProcessState
	if ps == nil {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// shellArgs returns the argv running script, through a file when the
// script is too long for one argument.
func (s *Server) shellArgs(script, dir, name string) ([]string, func(), error) {
	if len(script) <= maxInlineScript {
		return []string{s.shell, "-c", script}, func() {}, nil
	}
	p := filepath.Join(dir, name+".sh")
	if err := os.WriteFile(p, []byte(script), 0o600); err != nil {
		return nil, nil, fmt.Errorf("writing the script file: %w", err)
	}
	return []string{s.shell, p}, func() { os.Remove(p) }, nil
}

// spareScript is the program of a spare shell. It waits on fd 3 for the
// command (EOF: exit quietly) and runs it so that, however the shell ends
// (normally, `exit`, `set -e`, a syntax error), an EXIT trap writes its
// working directory and exported environment to the state pipe (fd 4 at
// start, moved to fd 59 under bash and fd 9 otherwise, out of the way of
// scripts that use low descriptors).
// Subshells and background jobs do not inherit the trap. The exit status is
// preserved, and the trap's own commands are hidden from `set -x`.
//
// Under bash, fd 3 carries the command's length in bytes, a newline and
// the command, which runs with eval, so it behaves as with `bash -c`; the
// state is `pwd`, NUL, `export -p`, NUL. Other shells get a newline on fd 3,
// source the command from scriptPath, and report `pwd`, NUL, `env -0`, NUL.
func spareScript(bash bool, scriptPath string) string {
	if bash {
		return `__agentbox_exit() { __agentbox_rc=$?; set +eu; { builtin printf '%s\0' "$PWD"; builtin export -p; builtin printf '\0'; } >&59; builtin exit "$__agentbox_rc"; }
IFS= builtin read -r __agentbox_n <&3 || builtin exit 0
LC_ALL=C IFS= builtin read -r -d '' -N "$__agentbox_n" __agentbox_cmd <&3
exec 3<&- 59>&4 4>&-
unset __agentbox_n
trap '{ __agentbox_exit; } 2>/dev/null' EXIT
builtin eval "$__agentbox_cmd"
`
	}
	return `__agentbox_exit() { __agentbox_rc=$?; set +eu; { printf '%s\0' "$PWD"; env -0; printf '\0'; } >&9; exit "$__agentbox_rc"; }
read -r __agentbox_go <&3 || exit 0
exec 3<&- 9>&4 4>&-
unset __agentbox_go
trap '{ __agentbox_exit; } 2>/dev/null' EXIT
. ` + shellQuote(scriptPath) + `
`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxState caps the shell state a command may report.
const maxState = 16 << 20

// readState reads the state an EXIT trap writes to r: the working
// directory, NUL, the environment (`export -p` under bash, `env -0`
// otherwise), NUL. It returns nil when the state is incomplete.
func readState(r io.Reader, bash bool) *shellState {
	var b []byte
	buf := make([]byte, 16<<10)
	complete := func() bool {
		if bash {
			return bytes.Count(b, []byte{0}) >= 2
		}
		return len(b) >= 2 && b[len(b)-1] == 0 && b[len(b)-2] == 0
	}
	for !complete() {
		n, err := r.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil || len(b) > maxState {
			return nil
		}
	}
	cwd, rest, _ := bytes.Cut(b, []byte{0})
	if !filepath.IsAbs(string(cwd)) {
		return nil
	}
	var env []string
	if bash {
		list, _, _ := bytes.Cut(rest, []byte{0})
		var err error
		if env, err = parseExportP(list); err != nil {
			return nil
		}
	} else {
		for _, f := range bytes.Split(bytes.TrimRight(rest, "\x00"), []byte{0}) {
			if len(f) > 0 {
				env = append(env, string(f))
			}
		}
	}
	return &shellState{cwd: string(cwd), env: normalizeEnv(env)}
}

// normalizeEnv returns env sorted, without malformed entries and without
// the variables a shell sets for itself (PWD, SHLVL, _) or the marker.
func normalizeEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		switch k {
		case "PWD", "SHLVL", "_", markerKey:
			continue
		}
		out = append(out, kv)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// waitDone waits for c to end, for ctx, or for the server to close.
func (c *command) waitDone(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
