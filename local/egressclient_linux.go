package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// How an engine talks to the state dir's shared egress proxy
// (egressd_linux.go): under the lock, over the control socket; it starts
// the proxy when none runs, and then hands it every running sandbox that
// needs it, taking their listening sockets from their inits.

// Files of the shared proxy in the state dir.
const (
	egressSocket = "egress-proxy.sock"
	egressLock   = "egress-proxy.lock"
)

// egressCallTimeout bounds one request to the proxy.
const egressCallTimeout = 10 * time.Second

// errEgressNotRunning is the error of openEgress when no proxy runs and
// none is to be started.
var errEgressNotRunning = errors.New("the egress proxy does not run")

// egressClient is a connection to the shared proxy of a state dir, made
// and held under its lock.
type egressClient struct {
	stateDir string
	lock     *os.File
	conn     *net.UnixConn
	started  bool // the proxy was started by openEgress: it serves no sandbox yet
}

// openEgress locks the shared proxy of stateDir and connects to it. When
// none runs it starts one if start is set, else fails with
// errEgressNotRunning.
func openEgress(ctx context.Context, stateDir string, start bool) (*egressClient, error) {
	lf, err := lockStateFile(ctx, stateDir, egressLock)
	if err != nil {
		return nil, err
	}
	c := &egressClient{stateDir: stateDir, lock: lf}
	c.conn, err = dialEgress(stateDir)
	switch {
	case err != nil && start:
		if err = startEgressProxy(stateDir); err == nil {
			c.started = true
			c.conn, err = dialEgress(stateDir)
		}
	case err != nil:
		err = errEgressNotRunning
	}
	if err != nil {
		lf.Close()
		return nil, err
	}
	return c, nil
}

// dialEgress connects to the control socket of the shared proxy of
// stateDir; it is refused when no proxy runs.
func dialEgress(stateDir string) (*net.UnixConn, error) {
	p, release, err := shortPath(stateDir, egressSocket)
	if err != nil {
		return nil, err
	}
	defer release()
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: p, Net: "unixpacket"})
}

// startEgressProxy starts the shared proxy of stateDir, whose lock the
// caller holds: it listens on the control socket and hands the socket to
// the proxy, started through a short-lived process so that it is no
// engine's child (it serves the sandboxes of every engine process).
func startEgressProxy(stateDir string) error {
	sock := filepath.Join(stateDir, egressSocket)
	_ = os.Remove(sock)
	p, release, err := shortPath(stateDir, egressSocket)
	if err != nil {
		return err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: p, Net: "unixpacket"})
	release()
	if err != nil {
		return fmt.Errorf("egress proxy: listen on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	_ = os.Chmod(sock, 0o600)
	lnf, err := ln.File()
	ln.Close()
	if err != nil {
		return err
	}
	defer lnf.Close()
	// The proxy's own open file of the lock, so that its flock and the
	// engines' exclude each other.
	lockf, err := os.OpenFile(filepath.Join(stateDir, egressLock), os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return stateDirError(stateDir, err)
	}
	defer lockf.Close()
	var stderr bytes.Buffer
	cmd := egressProxyCommand(egressSpawn, []*os.File{lnf, lockf})
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("start the egress proxy: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// call sends req with the descriptors files and returns the answer.
func (c *egressClient) call(req egressRequest, files []*os.File) (egressReply, error) {
	var r egressReply
	b, err := json.Marshal(req)
	if err != nil {
		return r, err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_ = c.conn.SetDeadline(time.Now().Add(egressCallTimeout))
	if _, _, err := c.conn.WriteMsgUnix(b, oob, nil); err != nil {
		return r, fmt.Errorf("egress proxy: %w", err)
	}
	buf := make([]byte, 1<<16)
	n, err := c.conn.Read(buf)
	if err != nil {
		return r, fmt.Errorf("egress proxy: %w", err)
	}
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return r, fmt.Errorf("egress proxy: bad answer: %w", err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("egress proxy: %s", r.Error)
	}
	return r, nil
}

// close closes the connection and releases the lock.
func (c *egressClient) close() {
	c.conn.Close()
	c.lock.Close()
}

// serve has the proxy serve the running sandbox m on its listening
// sockets lns, with the test hooks; with no socket, the proxy counts the
// sandbox as one it serves until its init ends or it gets them.
func (c *egressClient) serve(m *meta, lns []*os.File, hooks egressTestHooks) error {
	logf, err := os.OpenFile(filepath.Join(sandboxDir(c.stateDir, m.ID), egressLogFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return stateDirError(c.stateDir, err)
	}
	defer logf.Close()
	files := []*os.File{logf}
	sf, err := egressSecretsOf(c.stateDir, m.ID)
	if err != nil {
		return err
	}
	if sf != nil {
		defer sf.Close()
		files = append(files, sf)
	}
	_, err = c.call(egressRequest{
		Op: "serve", ID: m.ID, Allow: m.Config.Network.DomainAllowListString(),
		InitPID: m.Init.PID, InitStart: m.Init.StartTime, Secrets: sf != nil, egressTestHooks: hooks,
	}, append(files, lns...))
	return err
}

// serveRunning has a proxy that openEgress just started serve every
// running sandbox of the state dir with a domain allow list but skip
// (which the caller serves): those of a proxy that died. It reads their
// metadata without their locks (boots and network changes write it before
// they talk to the proxy, under its lock) and takes their listening
// sockets from their inits.
func (c *egressClient) serveRunning(skip string) {
	if !c.started {
		return
	}
	ents, _ := os.ReadDir(filepath.Join(c.stateDir, sandboxesDir))
	for _, e := range ents {
		id := e.Name()
		if id == skip || ValidateID(id) != nil {
			continue
		}
		m, err := readMeta(sandboxDir(c.stateDir, id))
		if err != nil || !m.alive() || !needsEgress(c.stateDir, &m) {
			continue
		}
		_ = c.serveAgain(&m, egressTestHooks{})
	}
}

// takeEgressListeners returns the listening sockets of the egress proxy
// of the running sandbox m: the init's, duplicated with pidfd_getfd(2)
// (the engine may do so: the init's user namespace is its, or it is
// root), or, for a sandbox that got its list while it ran (its init keeps
// none), new ones made in its network namespace as root. A sandbox whose
// init started with a list but named no socket yet is booting: its boot
// hands them over.
func takeEgressListeners(m *meta) ([]*os.File, error) {
	if len(m.EgressFDs) == 0 && m.ProxyEnv {
		return nil, errors.New("egress proxy: the sandbox is starting")
	}
	if len(m.EgressFDs) == 0 {
		return listenInSandbox(m)
	}
	pfd, err := unix.PidfdOpen(m.Init.PID, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	if st, ok := procStartTime(m.Init.PID); !ok || st != m.Init.StartTime {
		return nil, errors.New("the sandbox's init has ended")
	}
	var files []*os.File
	for _, n := range m.EgressFDs {
		fd, err := unix.PidfdGetfd(pfd, n, 0)
		if err != nil {
			closeFiles(files)
			return nil, fmt.Errorf("egress proxy: take the listening socket of the sandbox's init: %w", err)
		}
		f := os.NewFile(uintptr(fd), "listener")
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
			f.Close()
			closeFiles(files)
			return nil, fmt.Errorf("egress proxy: descriptor %d of the sandbox's init is not a listening socket", n)
		}
		files = append(files, f)
	}
	return files, nil
}

// listenInSandbox makes the egress proxy's listening sockets in the
// network namespace of the running sandbox m, which the host made.
func listenInSandbox(m *meta) ([]*os.File, error) {
	if m.Network == nil {
		return nil, fmt.Errorf("%w: the egress proxy of a sandbox started without root cannot be started while it runs; stop it and start it again", sandbox.ErrUnsupported)
	}
	sbx, err := openInitNetns(m.Init)
	if err != nil {
		return nil, err
	}
	defer sbx.Close()
	var lns []*os.File
	if err := inNetns(sbx, func() (err error) { lns, err = egressListeners(); return err }); err != nil {
		return nil, fmt.Errorf("egress proxy: listen in the sandbox: %w", err)
	}
	return lns, nil
}

// prepareEgress starts, when the sandbox m (whose init was just started)
// has a domain allow list, the state dir's shared proxy if none runs, in
// parallel with the init's start, and has it count the sandbox as one it
// serves (with no socket yet), so that it stays; wait returns the
// outcome. serveEgress then hands it the sandbox's sockets.
func (s *Sandbox) prepareEgress(ctx context.Context, m *meta) (wait func() error) {
	if !m.Config.hasDomains() {
		return func() error { return nil }
	}
	r := *m
	done := make(chan error, 1)
	go func() {
		c, err := openEgress(ctx, s.opts.StateDir, true)
		if err != nil {
			done <- err
			return
		}
		defer c.close()
		c.serveRunning(r.ID)
		done <- c.serve(&r, nil, s.egressTest)
	}()
	return func() error { return <-done }
}

// serveEgress has the state dir's shared proxy serve the sandbox m, just
// booted (after prepareEgress), on lns, the listening sockets its init
// handed over. It does nothing when m has no domain allow list.
func (s *Sandbox) serveEgress(ctx context.Context, m *meta, lns []*os.File) error {
	if !m.Config.hasDomains() {
		return nil
	}
	if len(lns) == 0 {
		return errors.New("egress proxy: the sandbox init made no listening socket for it")
	}
	c, err := openEgress(ctx, s.opts.StateDir, true)
	if err != nil {
		return err
	}
	defer c.close()
	c.serveRunning(m.ID)
	return c.serve(m, lns, s.egressTest)
}

// healEgress starts the state dir's shared proxy again if it died while
// the sandbox, which has a domain allow list or its secrets' redirect, runs: the new one serves
// every running sandbox that needs it. It costs a connect when the
// proxy runs.
func (s *Sandbox) healEgress(ctx context.Context) {
	if conn, err := dialEgress(s.opts.StateDir); err == nil {
		conn.Close()
		return
	}
	c, err := openEgress(ctx, s.opts.StateDir, true)
	if err != nil {
		return
	}
	defer c.close()
	c.serveRunning(s.opts.ID)
	if m, err := readMeta(s.dir); err == nil && m.alive() && needsEgress(s.opts.StateDir, &m) {
		_ = c.serveAgain(&m, s.egressTest)
	}
}

// applyEgressProxy brings the shared proxy in line with the Config of the
// running sandbox m (whose folder is dir): it tells the proxy the
// sandbox's new list, has it serve the sandbox (its listening sockets
// made in the sandbox's namespace as root), or stop serving it. It
// writes m first, so that a proxy started meanwhile by another engine
// serves the new list.
func (s *Sandbox) applyEgressProxy(ctx context.Context, dir string, m *meta) error {
	if err := writeMeta(dir, m); err != nil {
		return stateDirError(s.opts.StateDir, err)
	}
	if !m.Config.hasDomains() {
		dropEgress(ctx, s.opts.StateDir, m.ID)
		return nil
	}
	c, err := openEgress(ctx, s.opts.StateDir, true)
	if err != nil {
		return err
	}
	defer c.close()
	c.serveRunning(m.ID)
	if _, err := c.call(egressRequest{Op: "allow", ID: m.ID, Allow: m.Config.Network.DomainAllowListString()}, nil); err == nil {
		return nil
	}
	lns, err := takeEgressListeners(m)
	if err != nil {
		return err
	}
	defer closeFiles(lns)
	return c.serve(m, lns, s.egressTest)
}

// stopEgressProxy has the shared proxy of stateDir stop serving the
// sandbox m, whose init has ended, when it has a domain allow list or its
// secrets' redirect (the proxy also notices the end of the init by
// itself).
func stopEgressProxy(ctx context.Context, stateDir string, m *meta) {
	if needsEgress(stateDir, m) {
		dropEgress(ctx, stateDir, m.ID)
	}
}

// dropEgress has the shared proxy of stateDir, if it runs, stop serving
// the sandbox id; it exits when that was the last.
func dropEgress(ctx context.Context, stateDir, id string) {
	c, err := openEgress(ctx, stateDir, false)
	if err != nil {
		return
	}
	defer c.close()
	_, _ = c.call(egressRequest{Op: "drop", ID: id}, nil)
}

// egressServes reports whether the shared proxy of stateDir serves the
// sandbox id.
func egressServes(ctx context.Context, stateDir, id string) bool {
	c, err := openEgress(ctx, stateDir, false)
	if err != nil {
		return false
	}
	defer c.close()
	r, err := c.call(egressRequest{Op: "status"}, nil)
	return err == nil && slices.Contains(r.Serves, id)
}
