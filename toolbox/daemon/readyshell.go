package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// dismissGrace is how long a dismissed ready shell gets to exit before it
// is killed.
const dismissGrace = time.Second

// restoreTimeout bounds the write of the restore script to a ready shell.
const restoreTimeout = 5 * time.Second

// readyShell is a shell started ahead of time in a session's state, running
// the program of shellprog.go. It waits on a pipe for the signal to run the
// next command, so that the fork, exec and shell start-up of a command
// overlap the idle time between commands.
type readyShell struct {
	cmd      *exec.Cmd
	id       string   // marker id
	commandW *os.File // fdCommand: the command goes here; close to dismiss
	state    *os.File // fdState: the EXIT trap writes the shell state here
	stdin    *os.File // write end of the shell's stdin
	stdout   *os.File // read end of its stdout
	stderr   *os.File // read end of its stderr
	// Our copies of the write ends of stdout, stderr and the state pipe:
	// after the shell exits a sentinel written through them marks, in
	// order, the end of what the shell wrote.
	outW, errW, stateW *os.File
	// script is the file a shell other than bash sources the command
	// from; empty under bash, which reads it from fdCommand.
	script string
}

// pipe is the read and the write end of an os.Pipe.
type pipe struct{ r, w *os.File }

// newPipes creates n pipes, or none when one fails.
func newPipes(n int) ([]pipe, error) {
	ps := make([]pipe, 0, n)
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range ps {
				p.r.Close()
				p.w.Close()
			}
			return nil, err
		}
		ps = append(ps, pipe{r, w})
	}
	return ps, nil
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// startReadyShell starts a ready shell in the shell state st.
func (ss *session) startReadyShell(st shellState) (*readyShell, error) {
	srv := ss.srv
	env, cwd := st.env, st.cwd
	if fi, err := srv.root.stat(cwd); err != nil || !fi.IsDir() {
		cwd = srv.workDir
	}
	rs := &readyShell{id: randomHex(8)}
	if !srv.bash {
		rs.script = filepath.Join(ss.dir, rs.id+".sh")
	}
	env = append(withoutKeys(env, "PWD", markerKey), "PWD="+cwd, markerKey+"="+ss.token+":"+rs.id)

	ps, err := newPipes(6)
	if err != nil {
		return nil, err
	}
	command, stdin, stdout, stderr, state, restore := ps[0], ps[1], ps[2], ps[3], ps[4], ps[5]
	growPipe(stdout.w)
	growPipe(stderr.w)
	growPipe(restore.w)
	arg := srv.boot // bash reads the program from fdRestore
	if !srv.bash {
		arg = srv.program + ". " + sandbox.ShellQuote(rs.script) + "\n"
	}
	rs.cmd = &exec.Cmd{
		Path:   srv.shell,
		Args:   []string{srv.argv0, "-c", arg},
		Env:    env,
		Dir:    cwd,
		Stdin:  stdin.r,
		Stdout: stdout.w,
		Stderr: stderr.w,
		ExtraFiles: extraFiles(map[int]*os.File{
			fdCommand: command.r,
			fdState:   state.w,
			fdRestore: restore.r,
		}),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = srv.startCommand(rs.cmd)
	closeFiles(command.r, stdin.r, restore.r) // the child's ends
	if err != nil {
		closeFiles(command.w, stdin.w, stdout.r, stderr.r, state.r, restore.w, stdout.w, stderr.w, state.w)
		return nil, err
	}
	rs.commandW, rs.stdin, rs.stdout, rs.stderr, rs.state = command.w, stdin.w, stdout.r, stderr.r, state.r
	rs.outW, rs.errW, rs.stateW = stdout.w, stderr.w, state.w
	// Under bash: the program, then the shell variables and functions of
	// the previous command.
	if srv.bash {
		_ = restore.w.SetWriteDeadline(time.Now().Add(restoreTimeout))
		_, _ = restore.w.Write([]byte(srv.program + strconv.Itoa(len(st.restore)) + "\n" + st.restore))
	}
	restore.w.Close()
	return rs, nil
}

// extraFiles returns the exec.Cmd.ExtraFiles that give the child each file
// at its descriptor number (3 and up; gaps stay closed).
func extraFiles(byFD map[int]*os.File) []*os.File {
	var out []*os.File
	for fd, f := range byFD {
		for len(out) <= fd-3 {
			out = append(out, nil)
		}
		out[fd-3] = f
	}
	return out
}

// send hands the shell its command and closes the command pipe. keep says
// whether the shell reports its state when it ends (not for a stateless
// command). The message format is described in shellprog.go.
func (rs *readyShell) send(text string, keep bool) {
	mode := modeKeep
	if !keep {
		mode = modeDrop
	}
	msg := mode + "\n"
	if rs.script == "" {
		// bash reads the command from the pipe, its length first.
		msg = strconv.Itoa(len(text)) + " " + mode + "\n" + text
	}
	_, _ = rs.commandW.Write([]byte(msg))
	rs.commandW.Close()
}

// dismiss ends an unused ready shell.
func (rs *readyShell) dismiss() {
	rs.commandW.Close() // the shell sees EOF and exits quietly
	rs.stdin.Close()
	t := time.AfterFunc(dismissGrace, func() { _ = syscall.Kill(-rs.cmd.Process.Pid, syscall.SIGKILL) })
	_ = rs.cmd.Wait()
	t.Stop()
	closeFiles(rs.outW, rs.errW, rs.stateW, rs.stdout, rs.stderr, rs.state)
}

// prepareReadyShell starts the session's next ready shell unless the
// session is gone or has one. The caller holds the session's turn.
func (ss *session) prepareReadyShell() {
	ss.mu.Lock()
	if ss.deleted || ss.ready != nil {
		ss.mu.Unlock()
		return
	}
	st := ss.state
	ss.mu.Unlock()
	rs, err := ss.startReadyShell(st)
	if err != nil {
		return // the next command starts its own shell and reports the error
	}
	ss.keepReadyShell(rs)
}

// keepReadyShell makes rs the shell of the session's next command, or
// dismisses it when the session is gone or has one already.
func (ss *session) keepReadyShell(rs *readyShell) {
	ss.mu.Lock()
	if ss.deleted || ss.ready != nil {
		ss.mu.Unlock()
		rs.dismiss()
		return
	}
	ss.ready = rs
	ss.mu.Unlock()
}
