package daemon

import (
	"fmt"
	"os/exec"
	"runtime"
)

// A starter starts the processes of commands from one dedicated OS thread,
// when capability dropping is on or a thread setup is given. The setup runs
// on that thread first (e.g. to unshare namespaces that every command
// should inherit); with capability dropping on, the thread's capability
// bounding, inheritable and ambient sets are then emptied and its
// no_new_privs flag set. Credentials and namespaces are per thread on
// Linux and a child inherits those of the thread that forked it, so every
// command (even as uid 0) runs with no capabilities while the server keeps
// its own on every other thread.
type starter struct {
	reqs chan startReq
	done chan struct{}
}

type startReq struct {
	cmd *exec.Cmd
	err chan error
}

// newStarter returns a starter that runs setup (when not nil) on its
// thread, then drops every capability of the commands it starts but those
// of keep when drop is set. It returns nil when drop is false and setup
// nil: commands then start directly.
func newStarter(drop bool, keep []int, setup func() error) (*starter, error) {
	if !drop && setup == nil {
		return nil, nil
	}
	st := &starter{reqs: make(chan startReq), done: make(chan struct{})}
	ready := make(chan error, 1)
	go st.loop(drop, keep, setup, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return st, nil
}

func (st *starter) loop(drop bool, keep []int, setup func() error, ready chan<- error) {
	// The thread is never unlocked: when this goroutine returns, the Go
	// runtime ends the thread rather than reuse its changed credentials
	// or namespaces.
	runtime.LockOSThread()
	if setup != nil {
		if err := setup(); err != nil {
			ready <- fmt.Errorf("daemon: start thread setup: %w", err)
			return
		}
	}
	if drop {
		if err := dropThreadCapabilities(keep); err != nil {
			ready <- err
			return
		}
	}
	ready <- nil
	for {
		select {
		case r := <-st.reqs:
			r.err <- r.cmd.Start()
		case <-st.done:
			return
		}
	}
}

// start starts cmd, from the starter's thread when st is not nil.
func (st *starter) start(cmd *exec.Cmd) error {
	if st == nil {
		return cmd.Start()
	}
	r := startReq{cmd: cmd, err: make(chan error, 1)}
	select {
	case st.reqs <- r:
		return <-r.err
	case <-st.done:
		return fmt.Errorf("daemon: server closed")
	}
}

func (st *starter) close() {
	if st != nil {
		close(st.done)
	}
}
