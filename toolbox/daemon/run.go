package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/goroutine"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// Stream ids of a command's log records: those of the wire (frames and
// markers).
const (
	streamStdout = toolbox.StreamStdout
	streamStderr = toolbox.StreamStderr
)

// exitSignalBase is added to the number of the signal that ended a
// command, as shells do.
const exitSignalBase = 128

// readChunk is the largest read from a command's output pipe.
const readChunk = 256 << 10

// readBufs holds the buffers of pump, readChunk bytes each: most commands
// print little, and a fresh 256 KiB per stream and command would be most
// of what a command allocates.
var readBufs = sync.Pool{New: func() any {
	b := make([]byte, readChunk)
	return &b
}}

// sentinelTimeout bounds the write of an end-of-output sentinel.
const sentinelTimeout = 10 * time.Second

// maxInlineScript is the largest script passed with -c; longer ones go
// through a file (the kernel caps one argument at 128 KiB).
const maxInlineScript = 96 << 10

// run waits for the session's turn and runs c.
func (ss *session) run(c *command) {
	select {
	case <-ss.turn:
	case <-ss.killedCh:
		c.finish(sandbox.ExitKilled)
		return
	}
	defer func() { ss.turn <- struct{}{} }()

	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		c.finish(sandbox.ExitKilled)
		return
	}
	rs := ss.ready
	ss.ready = nil
	before := ss.state
	ss.mu.Unlock()

	if rs == nil {
		rs = ss.takeSpare() // the first command came before the session readied its shell
	}
	if rs == nil {
		var err error
		if rs, err = ss.startReadyShell(before); err != nil {
			c.log.write(streamStderr, fmt.Appendf(nil, "agentbox: cannot start the command: %v\n", err))
			c.finish(exitNotStarted)
			return
		}
	}
	// Most commands leave env and cwd alone: start the next shell now, in
	// the current state, and keep it if the state did not change.
	next := make(chan *readyShell, 1)
	ss.srv.bg.Go(func() {
		n, err := ss.startReadyShell(before)
		if err != nil {
			n = nil
		}
		next <- n
	})
	code, state := ss.exec(c, rs)
	if ss.diedOnExit(c, code) {
		if n := <-next; n != nil {
			n.dismiss()
		}
		ss.hangDead(c)
		return
	}
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
		ss.prepareReadyShell()
		return
	}
	ss.keepReadyShell(n)
}

// exec runs c in the ready shell rs to its end and returns its exit code
// and the shell state it left behind (nil when it reported none).
func (ss *session) exec(c *command, rs *readyShell) (int, *shellState) {
	srv := ss.srv
	text := ss.shellText(c)
	if rs.script != "" {
		defer srv.tmpFS.remove(rs.script)
		if err := srv.asUser(func() error { return srv.tmpFS.writeFile(rs.script, []byte(text), 0o600) }); err != nil {
			rs.dismiss()
			c.log.write(streamStderr, fmt.Appendf(nil, "agentbox: cannot start the command: %v\n", err))
			return exitNotStarted, nil
		}
	}
	if !c.setProcess(rs.cmd.Process.Pid, ss.token+":"+rs.id, rs.stdout, rs.stderr) {
		rs.dismiss()
		return sandbox.ExitKilled, nil
	}
	if c.async {
		c.attachStdin(rs.stdin)
	} else {
		rs.stdin.Close() // synchronous commands read EOF
	}

	// The sentinel is random, so a command cannot print it by chance.
	sentinel := []byte(randomHex(16))
	var readers goroutine.Group
	out := newPump(rs.stdout, streamStdout, c.log, sentinel)
	errp := newPump(rs.stderr, streamStderr, c.log, sentinel)
	readers.Go(out.run)
	readers.Go(errp.run)
	var stateCh chan *shellState
	stateSentinel := append([]byte{0xff}, sentinel...) // 0xff: never in the state's own text
	if c.stateless {
		// The shell closes its end unused.
		rs.stateW.Close()
		rs.state.Close()
	} else {
		stateCh = make(chan *shellState, 1)
		srv.bg.Go(func() { stateCh <- srv.sandboxState(readState(rs.state, srv.bash, stateSentinel)) })
	}

	rs.send(text, !c.stateless)
	werr := rs.cmd.Wait()
	code := exitCode(rs.cmd, werr)

	// Everything the shell wrote is in the pipes now. Background children
	// may hold them open, so EOF may never come: write a sentinel behind
	// the shell's output instead and wait until the readers reach it.
	// Output of background jobs after that is still logged.
	var state *shellState
	if stateCh != nil {
		writeSentinel(rs.stateW, stateSentinel)
	}
	out.arm()
	errp.arm()
	writeSentinel(rs.outW, sentinel)
	writeSentinel(rs.errW, sentinel)
	if stateCh != nil {
		state = <-stateCh
		rs.state.Close()
	}
	<-out.seen
	<-errp.seen
	// The readers go on with the output of background jobs; the pipes
	// are closed when they are done.
	srv.bg.Go(func() {
		_ = readers.Wait(context.Background())
		c.closePipes()
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

// A pump copies a command's output pipe into its log until EOF or until
// the pipe is closed, leaving out the end-of-output sentinel that the
// server writes behind the shell's output once the shell has exited.
type pump struct {
	f        *os.File
	stream   byte
	log      *cmdLog
	sentinel []byte
	armed    atomic.Bool   // the sentinel may be in the pipe (arm)
	seen     chan struct{} // closed when the sentinel has passed, or at EOF
}

func newPump(f *os.File, stream byte, log *cmdLog, sentinel []byte) *pump {
	return &pump{f: f, stream: stream, log: log, sentinel: sentinel, seen: make(chan struct{})}
}

// arm tells the pump that the sentinel is about to be written: from now
// on a read may end with the first bytes of it. Call it before the write.
func (p *pump) arm() { p.armed.Store(true) }

// run copies until EOF. Until the pump is armed no sentinel can be in the
// pipe, so every byte read goes to the log at once: a running command's
// output so far is complete, whatever it ends with. Once armed, bytes at
// the end of a read that could start the sentinel are held back until the
// next read tells.
func (p *pump) run() {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var held []byte // a possible start of the sentinel at the end of a read
	found := false
	for {
		n, err := p.f.Read(buf)
		data := buf[:n]
		// Armed is read after the read returned: if it was not armed
		// then, the sentinel's write had not begun when these bytes were
		// written, so they hold none of it.
		if !found && n > 0 && p.armed.Load() {
			if len(held) > 0 {
				data = append(held, data...)
				held = nil
			}
			if i := bytes.Index(data, p.sentinel); i >= 0 {
				p.log.write(p.stream, data[:i])
				data = data[i+len(p.sentinel):]
				found = true
				close(p.seen)
			} else if k := partialSuffix(data, p.sentinel); k > 0 {
				held = append([]byte(nil), data[len(data)-k:]...)
				data = data[:len(data)-k]
			}
		}
		p.log.write(p.stream, data)
		if err != nil {
			if !found {
				p.log.write(p.stream, held)
				close(p.seen)
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
			return exitNotStarted
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// shellArgs returns the argv running script, through a file when the
// script is too long for one argument.
func (s *Server) shellArgs(script, dir, name string) ([]string, func(), error) {
	if len(script) <= maxInlineScript {
		return []string{s.argv0, "-c", script}, func() {}, nil
	}
	p := filepath.Join(dir, name+".sh")
	if err := s.asUser(func() error { return s.tmpFS.writeFile(p, []byte(script), 0o600) }); err != nil {
		return nil, nil, fmt.Errorf("writing the script file: %w", err)
	}
	return []string{s.argv0, p}, func() { _ = s.tmpFS.remove(p) }, nil
}
