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

// readBufs holds the buffers of pump, readChunk bytes each: most commands
// print little, and a fresh 256 KiB per stream and command would be most
// of what a command allocates.
var readBufs = sync.Pool{New: func() any {
	b := make([]byte, readChunk)
	return &b
}}

// growPipe enlarges a pipe's buffer so that fast writers block less and
// reads come in bigger chunks. Failure is harmless.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
		})
	}
}

// sentinelTimeout bounds the write of an end-of-output sentinel.
const sentinelTimeout = 10 * time.Second

// maxInlineScript is the largest script passed with -c; longer ones go
// through a file (the kernel caps one argument at 128 KiB).
const maxInlineScript = 96 << 10

// session is a Daytona session: a saved shell state and the commands run in
// it, one at a time.
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
	spare    *spare        // shell ready for the next command, or nil
	killedCh chan struct{} // closed when the session is deleted
}

// command is one session command.
type command struct {
	id           string
	text         string
	async        bool
	suppressEcho bool
	stateless    bool // run without saving the shell state (extension "stateless")
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
		state:    shellState{cwd: s.workDir, env: normalizeEnv(s.baseEnv)},
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
// A stateless command leaves the session's state as it found it.
func (ss *session) start(req toolbox.SessionExecuteRequest, stateless bool) (*command, error) {
	c := &command{
		id:           newUUID(),
		text:         req.Command,
		async:        req.RunAsync || req.Async,
		suppressEcho: req.SuppressInputEcho,
		stateless:    stateless,
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
	// Our copies of the write ends of stdout, stderr and the state pipe:
	// after the shell exits a sentinel written through them marks, in
	// order, the end of what the shell wrote.
	outW, errW, stateW *os.File
	stdinW             *os.File
	outR               *os.File
	errR               *os.File
	script             string // file the command text goes to for non-bash shells
}

// spawn starts a spare shell with env in cwd.
func (ss *session) spawn(st shellState) (*spare, error) {
	srv := ss.srv
	env, cwd := st.env, st.cwd
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
	restoreR, restoreW, err := os.Pipe()
	if err != nil {
		closeAll(goR, goW, stdinR, stdinW, outR, outW, errR, errW, stateR, stateW)
		return nil, err
	}
	growPipe(outW)
	growPipe(errW)
	growPipe(restoreW)
	files = []*os.File{goR, stdinR, restoreR}
	sp.cmd = &exec.Cmd{
		Path:        srv.shell,
		Args:        []string{srv.shell, "-c", spareScript(srv.bash, sp.script)},
		Env:         env,
		Dir:         cwd,
		Stdin:       stdinR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{goR, stateW, restoreR},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = srv.starter.start(sp.cmd)
	closeAll(files...)
	if err != nil {
		closeAll(goW, stdinW, outR, errR, stateR, restoreW, outW, errW, stateW)
		return nil, err
	}
	sp.goW, sp.stdinW, sp.outR, sp.errR, sp.stateR = goW, stdinW, outR, errR, stateR
	sp.outW, sp.errW, sp.stateW = outW, errW, stateW
	// Shell variables and functions of the previous command (bash only).
	if srv.bash {
		_ = restoreW.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = restoreW.Write([]byte(strconv.Itoa(len(st.restore)) + "\n" + st.restore))
	}
	restoreW.Close()
	return sp, nil
}

// dismiss ends an unused spare.
func (sp *spare) dismiss() {
	sp.goW.Close() // the shell sees EOF and exits quietly
	sp.stdinW.Close()
	t := time.AfterFunc(time.Second, func() { _ = syscall.Kill(-sp.cmd.Process.Pid, syscall.SIGKILL) })
	_ = sp.cmd.Wait()
	t.Stop()
	sp.outW.Close()
	sp.errW.Close()
	sp.stateW.Close()
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
	st := ss.state
	ss.mu.Unlock()
	sp, err := ss.spawn(st)
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
	before := ss.state
	ss.mu.Unlock()

	if sp == nil {
		var err error
		if sp, err = ss.spawn(before); err != nil {
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
		n, err := ss.spawn(before)
		if err != nil {
			n = nil
		}
		next <- n
	})
	code, state := ss.exec(c, sp)
	if state != nil {
		ss.mu.Lock()
		ss.state = *state
		ss.mu.Unlock()
	}
	c.finish(code)
	n := <-next
	if n != nil && state != nil && !state.equal(before) {
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

// shellState is what a command's EXIT trap reports and the next command
// starts with: working directory, exported environment, and (bash only) a
// script restoring shell variables and functions.
type shellState struct {
	cwd     string
	env     []string
	restore string
}

func (a shellState) equal(b shellState) bool {
	return a.cwd == b.cwd && a.restore == b.restore && slices.Equal(a.env, b.env)
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

	// The sentinel is random, so a command cannot print it by chance.
	sentinel := []byte(randomHex(16))
	var readers sync.WaitGroup
	readers.Add(2)
	outSeen, errSeen := make(chan struct{}), make(chan struct{})
	srv.goTracked(func() { defer readers.Done(); pump(sp.outR, streamStdout, c.log, sentinel, outSeen) })
	srv.goTracked(func() { defer readers.Done(); pump(sp.errR, streamStderr, c.log, sentinel, errSeen) })
	var stateCh chan *shellState
	stateSentinel := append([]byte{0xff}, sentinel...) // 0xff: never in the state's own text
	if c.stateless {
		// The shell closes its end unused.
		sp.stateW.Close()
		sp.stateR.Close()
	} else {
		stateCh = make(chan *shellState, 1)
		srv.goTracked(func() { stateCh <- readState(sp.stateR, srv.bash, stateSentinel) })
	}

	// The mode word tells the shell whether to report its state; under
	// bash the command itself follows, length first.
	mode := "keep"
	if c.stateless {
		mode = "drop"
	}
	msg := mode + "\n"
	if srv.bash {
		msg = strconv.Itoa(len(c.text)) + " " + mode + "\n" + c.text
	}
	_, _ = sp.goW.Write([]byte(msg))
	sp.goW.Close()
	werr := sp.cmd.Wait()
	code := exitCode(sp.cmd, werr)

	// Everything the shell wrote is in the pipes now. Background children
	// may hold them open, so EOF may never come: write a sentinel behind
	// the shell's output instead and wait until the readers reach it.
	// Output of background jobs after that is still logged.
	var state *shellState
	if stateCh != nil {
		writeSentinel(sp.stateW, stateSentinel)
	}
	writeSentinel(sp.outW, sentinel)
	writeSentinel(sp.errW, sentinel)
	if stateCh != nil {
		state = <-stateCh
		sp.stateR.Close()
	}
	<-outSeen
	<-errSeen
	srv.goTracked(func() {
		readers.Wait()
		c.mu.Lock()
		pipes := c.pipes
		c.pipes = nil
		c.mu.Unlock()
		for _, p := range pipes {
			p.Close()
		}
	})
	return code, state
}

// writeSentinel writes the sentinel through our copy of a pipe's write end
// and closes it. A write of at most PIPE_BUF bytes is atomic, so the
// sentinel arrives in one piece even when other writers share the pipe.
func writeSentinel(w *os.File, sentinel []byte) {
	_ = w.SetWriteDeadline(time.Now().Add(sentinelTimeout))
	_, _ = w.Write(sentinel)
	w.Close()
}

// pump copies a command's output pipe into its log until EOF or until the
// pipe is closed, leaving out the sentinel; seen is closed when the
// sentinel has passed (or the pipe ended without it).
func pump(f *os.File, stream byte, log *cmdLog, sentinel []byte, seen chan struct{}) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var held []byte // a possible start of the sentinel at the end of a read
	found := false
	for {
		n, err := f.Read(buf)
		data := buf[:n]
		if !found && n > 0 {
			if len(held) > 0 {
				data = append(held, data...)
				held = nil
			}
			if i := bytes.Index(data, sentinel); i >= 0 {
				log.write(stream, data[:i])
				data = data[i+len(sentinel):]
				found = true
				close(seen)
			} else if k := partialSuffix(data, sentinel); k > 0 {
				held = append([]byte(nil), data[len(data)-k:]...)
				data = data[:len(data)-k]
			}
		}
		log.write(stream, data)
		if err != nil {
			if !found {
				log.write(stream, held)
				close(seen)
			}
			return
		}
	}
}

// partialSuffix returns the length of the longest proper prefix of s that
// data ends with.
func partialSuffix(data, s []byte) int {
	for k := min(len(s)-1, len(data)); k > 0; k-- {
		if bytes.Equal(data[len(data)-k:], s[:k]) {
			return k
		}
	}
	return 0
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
// fd 3 carries a mode word, "keep" or "drop": with "drop" (a stateless
// command) no trap is set and the state pipe is closed at once.
// Under bash, fd 3 carries the command's length in bytes, a space, the
// mode word, a newline and the command, which runs with eval, so it behaves as with `bash -c`; the
// state is `pwd`, NUL, `export -p`, NUL, `declare -p`, NUL, `declare -f`,
// NUL; and fd 5 carries, length first, the script restoring the previous
// command's shell variables and functions, run before the shell waits.
// Other shells get the mode word and a newline on fd 3, source the command from scriptPath,
// and report `pwd`, NUL, `env -0`, NUL; only exported variables persist.
func spareScript(bash bool, scriptPath string) string {
	if bash {
		// Every command of ours is a builtin (or `command exec`), so that
		// restored user functions cannot take their place.
		return `{ IFS= builtin read -r __agentbox_n <&5 && LC_ALL=C IFS= builtin read -r -d '' -N "$__agentbox_n" __agentbox_s <&5 && builtin eval "$__agentbox_s"; } 2>/dev/null
command exec 5<&- 59>&4 4>&-
builtin unset __agentbox_s __agentbox_n
__agentbox_exit() { __agentbox_rc=$?; builtin set +eu; { builtin printf '%s\0' "$PWD"; builtin export -p; builtin printf '\0'; builtin declare -p; builtin printf '\0'; builtin declare -f; builtin printf '\0'; } >&59; builtin exit "$__agentbox_rc"; }
IFS=' ' builtin read -r __agentbox_n __agentbox_m <&3 || builtin exit 0
LC_ALL=C IFS= builtin read -r -d '' -N "$__agentbox_n" __agentbox_cmd <&3
command exec 3<&-
case $__agentbox_m in
drop) command exec 59>&- ;;
*) builtin trap '{ __agentbox_exit; } 2>/dev/null' EXIT ;;
esac
builtin unset __agentbox_n __agentbox_m
builtin eval "$__agentbox_cmd"
`
	}
	return `__agentbox_exit() { __agentbox_rc=$?; set +eu; { printf '%s\0' "$PWD"; command env -0 && printf '\0'; } >&9; exit "$__agentbox_rc"; }
read -r __agentbox_go <&3 || exit 0
exec 3<&- 9>&4 4>&- 5<&-
case $__agentbox_go in
drop) exec 9>&- ;;
*) trap '{ __agentbox_exit; } 2>/dev/null' EXIT ;;
esac
unset __agentbox_go
. ` + shellQuote(scriptPath) + `
`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxState caps the shell state a command may report.
const maxState = 16 << 20

// readState reads the state an EXIT trap writes to r, up to the sentinel
// the server writes after the shell exited: the working directory, NUL,
// then under bash `export -p`, `declare -p` and `declare -f`, each followed
// by NUL, otherwise `env -0` and one more NUL. It returns nil when the trap
// did not write a complete state (the shell was killed, say).
func readState(r io.Reader, bash bool, sentinel []byte) *shellState {
	var b []byte
	buf := make([]byte, 16<<10)
	for {
		if i := bytes.Index(b, sentinel); i >= 0 {
			b = b[:i]
			break
		}
		n, err := r.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil || len(b) > maxState {
			return nil
		}
	}
	cwd, rest, ok := bytes.Cut(b, []byte{0})
	if !ok || !filepath.IsAbs(string(cwd)) {
		return nil
	}
	var env []string
	restore := ""
	if bash {
		parts := bytes.Split(rest, []byte{0})
		if len(parts) != 4 || len(parts[3]) != 0 {
			return nil
		}
		var err error
		if env, err = parseExportP(parts[0]); err != nil {
			return nil
		}
		restore = restoreScript(parts[1], parts[2])
	} else {
		if !bytes.HasSuffix(rest, []byte{0, 0}) && !bytes.Equal(rest, []byte{0}) {
			return nil
		}
		for _, f := range bytes.Split(bytes.TrimRight(rest, "\x00"), []byte{0}) {
			if len(f) > 0 {
				env = append(env, string(f))
			}
		}
	}
	return &shellState{cwd: string(cwd), env: normalizeEnv(env), restore: restore}
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
