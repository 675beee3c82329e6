package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// exitNotStarted is the exit code of a command whose shell could not be
// started (Daytona reports -1 as well).
const exitNotStarted = -1

// command is one session command.
type command struct {
	id           string
	text         string
	async        bool
	suppressEcho bool
	stateless    bool    // run without saving the shell state (extension "stateless")
	tether       *tether // ties the command to its client (extension "tether"), or nil
	log          *cmdLog

	// stdin of an async command (stdin.go): the write end, nil when
	// closed, not yet started, or sync. Input sent while the command is
	// queued waits in pending.
	stdinMu     sync.Mutex
	stdin       *os.File
	started     bool
	startedAt   time.Time // when started became true
	stdinClosed bool
	pending     []byte

	mu        sync.Mutex
	exitCode  *int
	killed    bool       // ended because the session was deleted
	abandoned bool       // killed because its client is gone (tether)
	pgid      int        // process group, 0 until started
	marker    string     // markerKey value prefix of its processes
	pipes     []*os.File // read ends of stdout and stderr
	done      chan struct{}
}

// start registers a command and runs it in the session's turn. It returns
// at once; c.done is closed when the command has ended.
// A stateless command leaves the session's state as it found it; a
// tethered one dies with its client (see tether).
func (ss *session) start(req toolbox.SessionExecuteRequest, stateless, tethered bool) (*command, error) {
	return ss.startID(newUUID(), req, stateless, tethered)
}

// startID is start with the command's id given.
func (ss *session) startID(id string, req toolbox.SessionExecuteRequest, stateless, tethered bool) (*command, error) {
	c := &command{
		id:           id,
		text:         req.Command,
		async:        req.RunAsync || req.Async,
		suppressEcho: req.SuppressInputEcho,
		stateless:    stateless,
		tether:       tetherOf(tethered),
		done:         make(chan struct{}),
	}
	c.log = newCmdLog(filepath.Join(ss.dir, c.id+".log"), &ss.srv.logMem, ss.srv.daytona)
	c.log.fsys = ss.srv.tmpFS
	ss.mu.Lock()
	if ss.deleted {
		ss.mu.Unlock()
		return nil, notFound("session %q not found", ss.id)
	}
	ss.cmds[c.id] = c
	ss.order = append(ss.order, c)
	ss.mu.Unlock()
	ss.srv.bg.Go(func() { ss.run(c) })
	if c.tether != nil && c.async {
		// A sync exec's request holds its command itself.
		ss.srv.bg.Go(func() { c.tether.watch(c) })
	}
	return c, nil
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

// ended reports whether the command has ended and why: killed when its
// session was deleted, else with the exit code.
func (c *command) ended() (code *int, killed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitCode, c.killed
}

// markKilled records that the session is being deleted while c runs, and
// returns the process group to kill (0: none, c has not started or ended).
func (c *command) markKilled() (pgid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitCode != nil {
		return 0
	}
	c.killed = true
	return c.pgid
}

// setProcess records the process group, marker and output pipes of c's
// shell. It reports false when the session was deleted or the client left
// first: then c must not run.
func (c *command) setProcess(pgid int, marker string, pipes ...*os.File) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed || c.abandoned {
		return false
	}
	c.pgid, c.marker, c.pipes = pgid, marker, pipes
	return true
}

// closePipes closes the read ends of c's output, once nothing reads them.
func (c *command) closePipes() {
	c.mu.Lock()
	pipes := c.pipes
	c.pipes = nil
	c.mu.Unlock()
	for _, p := range pipes {
		p.Close()
	}
}

// finish records the exit code and wakes everyone waiting for c.
func (c *command) finish(code int) {
	c.closeStdin()
	c.mu.Lock()
	if c.killed && code >= 0 && code < exitSignalBase {
		// The session was deleted before the command ended on its own.
		code = sandbox.ExitKilled
	}
	c.exitCode = &code
	c.mu.Unlock()
	c.log.finish()
	close(c.done)
}

// waitDone waits for c to end or for ctx.
func (c *command) waitDone(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
