package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// spare is an init a Pool started ahead of time: in namespaces of its own,
// with a host uid range of its own and a network namespace with a link
// and the default firewall, waiting on its control socket for the
// configuration of the sandbox that takes it. It runs no command: until
// configured it only reads the socket, and it exits when the socket closes
// (its pool's process ended).
type spare struct {
	key  string // its range's key in the state dir's id pool (spareKey)
	ids  idRange
	cmd  *exec.Cmd
	ctl  *os.File      // the control socket
	net  *netRecord    // its link and firewall
	done chan struct{} // closed once the init has ended and been reaped
}

// poolAvailable explains why this process cannot keep spare inits, or
// returns nil.
func poolAvailable() error {
	if !shiftedMode() {
		return fmt.Errorf("%w: a Pool needs root: its spare inits get host uid ranges and network namespaces of their own, which only root can give", sandbox.ErrIsolationUnavailable)
	}
	return checkUserns()
}

// startSpare starts a spare init for p and waits until its link and
// firewall are made.
func startSpare(ctx context.Context, p *Pool) (*spare, error) {
	key := spareKey()
	ids, err := allocateHostIDs(ctx, p.stateDir, key, p.base)
	if err != nil {
		return nil, err
	}
	release := func() { _ = releaseHostIDs(context.WithoutCancel(ctx), p.stateDir, key) }
	m := &meta{ID: key, HostIDs: &ids, Network: netRecordFor(p.netTest)}
	cmd, ctl, nb, err := forkInit(ctx, m, func(cmd *exec.Cmd) {
		cmd.Args = []string{"agentbox-init"} // whose sandbox is not known yet
		for i, kv := range cmd.Env {
			if strings.HasPrefix(kv, initEnv+"=") {
				cmd.Env[i] = initEnv + "=" + initSpare
			}
		}
	})
	if err != nil {
		release()
		return nil, err
	}
	sp := &spare{key: key, ids: ids, cmd: cmd, ctl: ctl, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(sp.done)
	}()
	err = nb.finish()
	if err == nil {
		sp.net = m.Network
		err = sp.awaitWaiting(ctx)
	}
	if err != nil {
		_ = sp.destroy(context.WithoutCancel(ctx), p.stateDir)
		return nil, err
	}
	return sp, nil
}

// awaitWaiting waits until the spare's init has started and waits for its
// configuration (it says spareWaiting), so that a filled pool has no start
// running; it kills the init when that takes readyTimeout or ctx ends.
func (sp *spare) awaitWaiting(ctx context.Context) error {
	said := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := unix.Read(int(sp.ctl.Fd()), b)
		said <- string(b[:max(n, 0)])
	}()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	var err error
	select {
	case s := <-said:
		if s == spareWaiting {
			return nil
		}
		if s == "" {
			return errors.New("sandbox init: ended while it started")
		}
		return initError(s)
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("sandbox init: not started after %v", readyTimeout)
	}
	_ = sp.cmd.Process.Kill()
	<-said // the socket's other end is gone with the init
	return err
}

// alive reports whether the spare's init still runs: it has not been
// reaped, and its end of the control socket is open (an init that ended,
// reaped or not yet, has closed it; a waiting one never writes).
func (sp *spare) alive() bool {
	select {
	case <-sp.done:
		return false
	default:
	}
	fds := []unix.PollFd{{Fd: int32(sp.ctl.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n == 0
}

// destroy ends the spare's init and returns its link, firewall and range.
func (sp *spare) destroy(ctx context.Context, stateDir string) error {
	sp.ctl.Close()
	_ = sp.cmd.Process.Kill()
	<-sp.done
	teardownNetwork(ctx, &meta{Network: sp.net})
	return releaseHostIDs(ctx, stateDir, sp.key)
}

// adopt readies the spare as the init of the sandbox m, in its folder dir
// (locked by the caller): as launch does once it has started an init, it
// moves the init into the cgroups cg and sends it its configuration; ready
// waits until it serves.
func (sp *spare) adopt(ctx context.Context, dir string, m *meta, cg *cgroupSet, disk *pendingDisk, stateDir string) (ready func() (initAnswer, error), err error) {
	if err := configure(ctx, sp.cmd.Process.Pid, sp.ctl, dir, m, cg, disk, stateDir); err != nil {
		sp.ctl.Close()
		_ = sp.cmd.Process.Kill()
		return nil, err
	}
	return func() (initAnswer, error) { return awaitReady(ctx, sp.cmd, sp.ctl) }, nil
}
